/* Checkpoint writer and reader (see ckpt.h; byte layout in README.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "banned.h"

/* Upper bound of the header: magic, version, layers, dims, the rest. */
#define CKPT_HEADER_MAX (8 + 4 + 4 + 4 * (MLP_MAX_LAYERS + 1) + 4 + 8 * 5 + 4 * 5)

struct wbuf {
	unsigned char b[CKPT_HEADER_MAX];
	size_t n;
};

static void put_u32(struct wbuf *w, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		w->b[w->n++] = (unsigned char)(v >> (8 * i));
}

static void put_u64(struct wbuf *w, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		w->b[w->n++] = (unsigned char)(v >> (8 * i));
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* Writes n bytes to f and folds them into the checksum. */
static int write_sum(FILE *f, const void *p, size_t n, uint64_t *sum)
{
	*sum = k_fnv1a(*sum, p, n);
	return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int write_floats(FILE *f, const float *a, size_t n, uint64_t *sum)
{
	unsigned char buf[4096 * 4];
	while (n) {
		size_t k = n < 4096 ? n : 4096;
		for (size_t i = 0; i < k; i++) {
			uint32_t u = f32_bits(a[i]);
			for (int j = 0; j < 4; j++)
				buf[4 * i + (size_t)j] = (unsigned char)(u >> (8 * j));
		}
		if (write_sum(f, buf, 4 * k, sum) < 0)
			return -1;
		a += k;
		n -= k;
	}
	return 0;
}

/* fsync the folder holding path, so the rename itself is durable. */
static void fsync_parent(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd;
	if (!slash) {
		dir[0] = '.';
		dir[1] = '\0';
	} else {
		size_t n = (size_t)(slash - path);
		if (n == 0)
			n = 1;
		if (n >= sizeof(dir))
			return;
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	fd = open(dir, O_RDONLY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int ckpt_save(const char *path, const struct ckpt_meta *meta, const float *params,
	      const float *m, const float *v, struct kerr *e)
{
	struct wbuf w = { .n = 0 };
	const struct mlp_shape *s = &meta->shape;
	size_t n = mlp_n_params(s);
	uint64_t sum = K_FNV_INIT;
	unsigned char tail[8];
	char tmp[4096];
	FILE *f;
	int len;

	len = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if (len < 0 || (size_t)len >= sizeof(tmp))
		return kerr_set(e, K_EIO, "checkpoint path '%s' is too long", path);

	memcpy(w.b, CKPT_MAGIC, 8);
	w.n = 8;
	put_u32(&w, CKPT_VERSION);
	put_u32(&w, (uint32_t)s->n_layers);
	for (int i = 0; i <= s->n_layers; i++)
		put_u32(&w, (uint32_t)s->dims[i]);
	put_u32(&w, meta->batch);
	put_u64(&w, meta->step);
	put_u64(&w, meta->seed);
	put_u64(&w, meta->sample_pos);
	put_u64(&w, meta->data_fp);
	put_u32(&w, f32_bits(meta->hp.lr));
	put_u32(&w, f32_bits(meta->hp.wd));
	put_u32(&w, f32_bits(meta->hp.beta1));
	put_u32(&w, f32_bits(meta->hp.beta2));
	put_u32(&w, f32_bits(meta->hp.eps));
	put_u64(&w, (uint64_t)n);

	f = fopen(tmp, "wb");
	if (!f)
		return kerr_errno(e, K_EIO, "cannot create '%s'", tmp);
	if (write_sum(f, w.b, w.n, &sum) < 0 || write_floats(f, params, n, &sum) < 0 ||
	    write_floats(f, m, n, &sum) < 0 || write_floats(f, v, n, &sum) < 0)
		goto fail;
	for (int i = 0; i < 8; i++)
		tail[i] = (unsigned char)(sum >> (8 * i));
	if (fwrite(tail, 1, 8, f) != 8 || fflush(f) != 0 || fsync(fileno(f)) != 0)
		goto fail;
	if (fclose(f) != 0) {
		f = NULL;
		goto fail;
	}
	if (rename(tmp, path) != 0) {
		int ret = kerr_errno(e, K_EIO, "cannot rename '%s' to '%s'", tmp, path);
		unlink(tmp);
		return ret;
	}
	fsync_parent(path);
	return 0;
fail:
	{
		int ret = kerr_errno(e, K_EIO, "cannot write '%s'", tmp);
		if (f)
			fclose(f);
		unlink(tmp);
		return ret;
	}
}

static float *read_floats(const unsigned char *p, size_t n)
{
	float *a = malloc((n ? n : 1) * sizeof(float));
	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++)
		a[i] = bits_f32(get_u32(p + 4 * i));
	return a;
}

int ckpt_load(const char *path, struct ckpt_meta *meta, float **params,
	      float **m, float **v, struct kerr *e)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b = NULL;
	long flen;
	size_t len, off, n, need;
	uint32_t version, layers;
	int ret = K_ECKPT;

	*params = *m = *v = NULL;
	memset(meta, 0, sizeof(*meta));
	if (!f)
		return kerr_errno(e, K_EIO, "cannot open checkpoint '%s'", path);
	if (fseek(f, 0, SEEK_END) != 0 || (flen = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		ret = kerr_errno(e, K_EIO, "cannot read checkpoint '%s'", path);
		goto out;
	}
	len = (size_t)flen;
	b = malloc(len ? len : 1);
	if (!b) {
		ret = kerr_set(e, K_ENOMEM, "out of memory reading checkpoint '%s'", path);
		goto out;
	}
	if (len && fread(b, 1, len, f) != len) {
		ret = kerr_errno(e, K_EIO, "cannot read checkpoint '%s'", path);
		goto out;
	}
	if (len < 16 || memcmp(b, CKPT_MAGIC, 8) != 0) {
		kerr_set(e, K_ECKPT, "'%s' is not a checkpoint (bad magic)", path);
		goto out;
	}
	version = get_u32(b + 8);
	if (version != CKPT_VERSION) {
		kerr_set(e, K_ECKPT, "checkpoint '%s' has version %u; this build reads version %d",
			 path, version, CKPT_VERSION);
		goto out;
	}
	layers = get_u32(b + 12);
	if (layers < 1 || layers > MLP_MAX_LAYERS) {
		kerr_set(e, K_ECKPT, "checkpoint '%s': bad layer count %u", path, layers);
		goto out;
	}
	off = 16;
	need = off + 4 * ((size_t)layers + 1) + 4 + 8 * 4 + 4 * 5 + 8;
	if (len < need + 8) {
		kerr_set(e, K_ECKPT, "checkpoint '%s' is truncated (%zu bytes)", path, len);
		goto out;
	}
	meta->shape.n_layers = (int)layers;
	for (uint32_t i = 0; i <= layers; i++, off += 4) {
		uint32_t d = get_u32(b + off);
		if (d < 1 || d > MLP_MAX_DIM) {
			kerr_set(e, K_ECKPT, "checkpoint '%s': bad layer width %u", path, d);
			goto out;
		}
		meta->shape.dims[i] = (int)d;
	}
	meta->batch = get_u32(b + off);
	meta->step = get_u64(b + off + 4);
	meta->seed = get_u64(b + off + 12);
	meta->sample_pos = get_u64(b + off + 20);
	meta->data_fp = get_u64(b + off + 28);
	off += 36;
	meta->hp.lr = bits_f32(get_u32(b + off));
	meta->hp.wd = bits_f32(get_u32(b + off + 4));
	meta->hp.beta1 = bits_f32(get_u32(b + off + 8));
	meta->hp.beta2 = bits_f32(get_u32(b + off + 12));
	meta->hp.eps = bits_f32(get_u32(b + off + 16));
	off += 20;
	n = mlp_n_params(&meta->shape);
	if (get_u64(b + off) != n) {
		kerr_set(e, K_ECKPT, "checkpoint '%s': parameter count %llu does not match "
			 "its shape (%zu)", path, (unsigned long long)get_u64(b + off), n);
		goto out;
	}
	off += 8;
	if (len != off + 12 * n + 8) {
		kerr_set(e, K_ECKPT, "checkpoint '%s' is %s (%zu bytes, expected %zu)", path,
			 len < off + 12 * n + 8 ? "truncated" : "too long", len, off + 12 * n + 8);
		goto out;
	}
	if (k_fnv1a(K_FNV_INIT, b, len - 8) != get_u64(b + len - 8)) {
		kerr_set(e, K_ECKPT, "checkpoint '%s' is corrupt (checksum mismatch)", path);
		goto out;
	}
	*params = read_floats(b + off, n);
	*m = read_floats(b + off + 4 * n, n);
	*v = read_floats(b + off + 8 * n, n);
	if (!*params || !*m || !*v) {
		free(*params);
		free(*m);
		free(*v);
		*params = *m = *v = NULL;
		ret = kerr_set(e, K_ENOMEM, "out of memory reading checkpoint '%s'", path);
		goto out;
	}
	ret = 0;
out:
	free(b);
	fclose(f);
	return ret;
}

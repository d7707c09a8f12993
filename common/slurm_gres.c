/* GPUs in a Slurm gres string (see slurm_gres.h). */
#include <stdio.h>
#include <string.h>

#include "slurm_gres.h"
#include "util.h"

long long slurm_gres_gpus(const char *gres, size_t len, const char *type)
{
	long long total = 0;
	size_t tl = type ? strlen(type) : 0;

	for (size_t i = 0; i < len;) {
		size_t n = 0;
		while (i + n < len && gres[i + n] != ',')
			n++;
		/* One entry: NAME[:TYPE]:COUNT[(S:...)], or NAME alone. */
		const char *e = gres + i;
		size_t el = n;
		for (size_t k = 0; k < el; k++)
			if (e[k] == '(') {
				el = k;
				break;
			}
		i += n + 1;
		if (el < 4 || strncmp(e, "gpu:", 4))
			continue;
		const char *last = e + el;
		while (last > e && last[-1] != ':')
			last--;
		size_t cl = (size_t)(e + el - last);
		char num[24];
		long long c;
		if (!cl || cl >= sizeof(num))
			return -1;
		memcpy(num, last, cl);
		num[cl] = '\0';
		if (parse_ll(num, 0, 1 << 20, &c) < 0)
			return -1;
		/* The type is what lies between "gpu:" and ":COUNT". */
		const char *t = e + 4;
		size_t tlen = last > t ? (size_t)(last - 1 - t) : 0;
		if (tl && (tlen != tl || strncmp(t, type, tl)))
			continue;
		total += c;
	}
	return total;
}

/* A partition's name for a message: printable ASCII, cut to n-1. */
static void copy_clean(char *dst, size_t n, const char *src, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < n; i++) {
		unsigned char ch = (unsigned char)src[i];
		dst[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	dst[o] = '\0';
}

int slurm_parse_all_gpus(const char *text, int gres_field, const char *partition,
			 const char *type, long long *n, struct gr_err *err)
{
	long long got = -1;
	int found = 0;
	char pname[128] = "";

	*n = 0;
	for (const char *l = text ? text : ""; *l;) {
		size_t len = strcspn(l, "\n"), nl;
		const char *bar = memchr(l, '|', len), *g = bar, *gend;
		const char *next = l + len + (l[len] == '\n');
		for (int f = 1; g && f < gres_field; f++)
			g = memchr(g + 1, '|', (size_t)(l + len - g - 1));
		if (!bar || !g) {
			l = next;
			continue;
		}
		gend = memchr(g + 1, '|', (size_t)(l + len - g - 1));
		if (!gend)
			gend = l + len;
		nl = (size_t)(bar - l);
		int is_default = nl && l[nl - 1] == '*';
		size_t name_len = nl - (size_t)is_default;
		if (*partition ? (name_len == strlen(partition) && !strncmp(l, partition, name_len))
			       : is_default) {
			long long c = slurm_gres_gpus(g + 1, (size_t)(gend - g - 1), type);
			found = 1;
			copy_clean(pname, sizeof(pname), l, name_len);
			if (c < 0)
				return gr_errf(err, GR_EREMOTE, "cannot read partition %s's gres in "
					       "sinfo's answer", pname);
			if (got >= 0 && c != got)
				return gr_errf(err, GR_EINVAL, "[train] gpus = all, but the nodes of "
					       "partition %s have %lld and %lld GPUs%s%s: set [train] gpus "
					       "to a count", pname, got < c ? got : c, got < c ? c : got,
					       *type ? " of type " : "", type);
			got = c;
		}
		l = next;
	}
	if (!found)
		return *partition ? gr_errf(err, GR_EINVAL, "no partition '%s' on this cluster",
					    partition)
				  : gr_errf(err, GR_EINVAL, "the cluster has no default partition: "
					    "set [slurm] partition");
	*n = got;
	return 0;
}


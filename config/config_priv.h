/* Internal to config/: what config.c (the layers, the values, finding
 * the files) and config_file.c (reading one file) share. */
#ifndef GR_CONFIG_PRIV_H
#define GR_CONFIG_PRIV_H

#include "config_int.h"

struct val {
	char *text;    /* canonical text (see cfgk_normalize) */
	char *origin;  /* "default", "gpurun.ini:12", "env GPURUN_X", "-o" */
	int layer;     /* LAYER_* */
	int line;      /* first file line that set it */
};

/* A [pools] entry: NAME = hosts. */
struct pool {
	char *name;
	char *text;    /* the hosts, joined by one space (cfgk_check_host) */
	char *origin;  /* "~/.config/gpurun/config:4" */
	int layer;     /* LAYER_USER or LAYER_FILE */
	int line;
};

struct priv {
	size_t n;
	struct val *v;
	char *disp;    /* the file as messages name it: "gpurun.ini", "../gpurun.ini" */
	char *user_disp; /* the user config as messages name it ("~/.config/gpurun/config") */
	struct pool *pools;
	size_t npools;
	struct strvec hosts; /* [remote] host expanded (resolve_hosts) */
	char *pool;          /* the pool it named, or "" */
};

const struct gr_config_key *cfg_key_at(int i);
/* Store a normalised value. Lists set again at the same level add up;
 * everything else is replaced. */
void cfg_store(struct priv *p, int i, const char *text, int layer, const char *origin,
	       int line);
struct pool *cfg_pool_find(const struct priv *p, const char *name);

/* Parse path (messages say disp) into layer (config_file.c). */
int cfg_load_file(struct gr_config *c, const char *path, const char *disp, int layer,
		  struct gr_err *err);

#endif

/* GPUs in a Slurm gres string, as sinfo's %G and scontrol print it
 * ("gpu:2", "gpu:a100:4(S:0-1)", "gpu:a100:2,gpu:v100:2,mps:100",
 * "(null)"): shared by the agent ([train] gpus = all asks for every GPU
 * of a node) and doctor (which warns where the request and the partition
 * disagree). The text comes from the host: parsed, never trusted. */
#ifndef GR_SLURM_GRES_H
#define GR_SLURM_GRES_H

#include <stddef.h>

#include "err.h"

/* The GPUs one node of this gres has (of type when type is non-empty):
 * the sum of its gpu entries, 0 when none; -1 when an entry's count is
 * not a number. */
long long slurm_gres_gpus(const char *gres, size_t len, const char *type);

/* [train] gpus = all: the GPUs of one node of partition (empty: the
 * cluster's default, the name sinfo marks with '*') in sinfo's lines
 * (text: "NAME|...", the gres in field gres_field, counted from 0), of
 * type when non-empty. *n: 0 when it has none. GR_EINVAL when its nodes
 * differ (a count must say which) or there is no such partition;
 * GR_EREMOTE when a gres cannot be read. */
int slurm_parse_all_gpus(const char *text, int gres_field, const char *partition,
			 const char *type, long long *n, struct gr_err *err);

#endif

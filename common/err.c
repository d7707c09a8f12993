/* The error context: message, hint, code (see err.h). */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gr_errf(struct gr_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	err->hint[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void gr_hintf(struct gr_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
	va_end(ap);
}

void gr_err_prefix(struct gr_err *err, const char *fmt, ...)
{
	char pre[512], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is acceptable here: the cause comes last and is kept
	 * as far as it fits. */
	size_t n = strlen(pre);
	if (n > sizeof(err->msg) - 3)
		n = sizeof(err->msg) - 3;
	memcpy(err->msg, pre, n);
	memcpy(err->msg + n, ": ", 2);
	size_t m = strnlen(old, sizeof(old) - 1);
	if (m > sizeof(err->msg) - n - 3)
		m = sizeof(err->msg) - n - 3;
	memcpy(err->msg + n + 2, old, m);
	err->msg[n + 2 + m] = '\0';
}

void gr_err_clear(struct gr_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = err->hint[0] = '\0';
}

const char *gr_strcode(int code)
{
	switch (code) {
	case GR_OK: return "GR_OK";
	case GR_EINVAL: return "GR_EINVAL";
	case GR_ENOMEM: return "GR_ENOMEM";
	case GR_EIO: return "GR_EIO";
	case GR_ECONFIG: return "GR_ECONFIG";
	case GR_ENOTFOUND: return "GR_ENOTFOUND";
	case GR_ESSH: return "GR_ESSH";
	case GR_EHOSTKEY: return "GR_EHOSTKEY";
	case GR_EAUTH: return "GR_EAUTH";
	case GR_EPROTO: return "GR_EPROTO";
	case GR_EAGENT: return "GR_EAGENT";
	case GR_EREMOTE: return "GR_EREMOTE";
	case GR_ETIMEOUT: return "GR_ETIMEOUT";
	case GR_ECANCEL: return "GR_ECANCEL";
	case GR_EUNSUPP: return "GR_EUNSUPP";
	case GR_EEXIST: return "GR_EEXIST";
	case GR_EUSAGE: return "GR_EUSAGE";
	case GR_ECONFLICT: return "GR_ECONFLICT";
	}
	return "GR_E?";
}

int gr_exit_code(int code)
{
	switch (code) {
	case GR_OK: return GR_EXIT_OK;
	case GR_ECONFIG: return GR_EXIT_CONFIG;
	case GR_EUSAGE: return GR_EXIT_USAGE;
	case GR_EHOSTKEY: case GR_EAUTH: return GR_EXIT_AUTH;
	case GR_ESSH: case GR_ETIMEOUT: case GR_EAGENT: case GR_EUNSUPP:
		return GR_EXIT_CONNECT;
	case GR_EREMOTE: case GR_EPROTO: return GR_EXIT_REMOTE;
	case GR_ECANCEL: return GR_EXIT_INTERRUPTED;
	}
	return GR_EXIT_FAILURE;
}

#include "vmm/core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tvm_errf(struct tvm_err *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return -code;
}

void tvm_err_prefix(struct tvm_err *e, const char *fmt, ...)
{
	char out[sizeof(e->msg)];
	size_t n, rest;
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	vsnprintf(out, sizeof(out) - 2, fmt, ap);
	va_end(ap);
	n = strlen(out);
	out[n++] = ':';
	out[n++] = ' ';
	/* The old message is cut, not the prefix that names the thing. */
	rest = strnlen(e->msg, sizeof(out) - 1 - n);
	memcpy(out + n, e->msg, rest);
	out[n + rest] = '\0';
	memcpy(e->msg, out, sizeof(out));
}

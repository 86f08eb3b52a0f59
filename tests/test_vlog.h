/* A log sink like the VM's (vm_log: one "tinyvmm: LINE\n" write per call
 * to the log fd), writing into a pipe, for asserting what a transport
 * logs (virtio_mmio_set_log). */
#ifndef TVM_TESTS_VLOG_H
#define TVM_TESTS_VLOG_H

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

struct tlog {
	int fd[2];
	char text[4096]; /* what tlog_read found, NUL-terminated */
};

static inline void tlog_open(struct tlog *l)
{
	ck_assert_int_eq(pipe2(l->fd, O_NONBLOCK | O_CLOEXEC), 0);
	l->text[0] = 0;
}

/* virtio_log_fn; ctx is the struct tlog. */
static inline void tlog_line(void *ctx, const char *line)
{
	struct tlog *l = ctx;

	dprintf(l->fd[1], "tinyvmm: %s\n", line);
}

/* Everything logged since the last call (the pipe drained). */
static inline const char *tlog_read(struct tlog *l)
{
	ssize_t n = read(l->fd[0], l->text, sizeof(l->text) - 1);

	l->text[n > 0 ? n : 0] = 0;
	return l->text;
}

static inline void tlog_close(struct tlog *l)
{
	close(l->fd[0]);
	close(l->fd[1]);
}

#endif

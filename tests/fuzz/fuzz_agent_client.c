/* libFuzzer target: the host agent client (vmm/agent_client.c) reading
 * whatever a hostile guest agent sends. The input is the agent's whole
 * side of a connection, written into a socketpair before the host starts
 * (then EOF); the host opens the connection and runs a job, a get, a put
 * and a seed on it until one fails.
 *
 * Beyond crashes and leaks (ASan/UBSan), it checks the promises the host
 * makes to its callers: output given to the callback never exceeds the cap
 * asked for, a get never returns more than its cap, failures leave *data
 * NULL, and every error message is one line of printable text. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmm/tinyvmm.h"

#define OUT_CAP 300
#define GET_CAP 700

static size_t out_bytes[3];

static void on_output(void *ctx, int stream, const void *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	if (stream != 1 && stream != 2)
		abort();
	out_bytes[stream] += len;
	if (out_bytes[stream] > OUT_CAP)
		abort(); /* more than the cap asked for */
}

static void check_msg(int r, const struct tvm_err *e)
{
	if (r > 0)
		abort();
	if (r == 0)
		return;
	if (e->code != -r || !e->msg[0])
		abort();
	for (const char *c = e->msg; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			abort(); /* not one printable line */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const argv[] = { "true", NULL };
	struct tvm_job job = { .argv = argv,
			       .uid = TVM_ID_DEFAULT,
			       .gid = TVM_ID_DEFAULT,
			       .stdout_cap = OUT_CAP,
			       .stderr_cap = OUT_CAP,
			       .on_output = on_output,
			       .stdin_data = "in",
			       .stdin_len = 2 };
	struct tvm_job_result res;
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	int sv[2], r, sndbuf = 4 << 20;
	void *got = (void *)&got;
	size_t len = 1;

	if (size > (1u << 20))
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf));
	/* The agent's side, all at once; what does not fit is cut. */
	for (size_t off = 0; off < size;) {
		ssize_t n = send(sv[1], data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	shutdown(sv[1], SHUT_WR);
	memset(out_bytes, 0, sizeof(out_bytes));

	r = tvm_agent_open(sv[0], 0, &a, &e);
	check_msg(r, &e);
	if (r) {
		if (a)
			abort();
		close(sv[1]);
		return 0;
	}
	r = tvm_agent_exec(a, &job, &res, &e);
	check_msg(r, &e);
	if (!r && (res.exit_code < 0 || res.exit_code > 255 || res.signal < 0 || res.signal > 64))
		abort();
	if (!r) {
		r = tvm_agent_get_file(a, "/f", GET_CAP, &got, &len, &e);
		check_msg(r, &e);
		if (r ? got != NULL || len != 0 : got == NULL || len > GET_CAP)
			abort();
		free(got);
	}
	if (!r) {
		r = tvm_agent_put_file(a, "/p", 0644, "data", 4, &e);
		check_msg(r, &e);
	}
	if (!r) {
		r = tvm_agent_seed(a, &e);
		check_msg(r, &e);
	}
	tvm_agent_close(a);
	close(sv[1]);
	return 0;
}

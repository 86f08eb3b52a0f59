/* Embedding tinyvmm as a library user would, against the installed header
 * and shared library (tests/install/run.sh compiles it with
 * `pkg-config --cflags --libs tinyvmm`): boot the base image, run one job
 * in it through the agent, print its output, end the VM.
 * usage: embed VMLINUX ROOTFS.ext4 */
#include <stdio.h>
#include <tinyvmm.h>

static void on_output(void *ctx, int stream, const void *buf, size_t len)
{
	(void)ctx;
	fwrite(buf, 1, len, stream == 1 ? stdout : stderr);
}

int main(int argc, char **argv)
{
	const char *const job_argv[] = { "python3", "-c", "print(6*7)", NULL };
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct tvm_job job;
	struct tvm_job_result r;
	struct tvm_vm *vm;
	struct tvm_agent *agent;
	int st;

	if (argc != 3) {
		fprintf(stderr, "usage: %s VMLINUX ROOTFS\n", argv[0]);
		return 2;
	}
	tvm_config_init(&c);
	c.kernel_path = argv[1];
	c.cmdline = "console=ttyS0 reboot=k panic=-1 quiet";
	c.drives[0] = (struct tvm_drive){ .path = argv[2], .cow = 1 };
	c.nr_drives = 1;
	c.root_drive = 1;
	c.ttl_ms = 900000;
	if (tvm_vm_create(&c, &vm, &e) || tvm_vm_start(vm, &e)) {
		fprintf(stderr, "embed: %s\n", e.msg);
		return 1;
	}
	if (tvm_vm_agent_connect(vm, 600000, &agent, &e)) {
		fprintf(stderr, "embed: %s\n", e.msg);
		tvm_vm_destroy(vm);
		return 1;
	}
	tvm_job_init(&job); /* runs as the guest's unprivileged user */
	job.argv = job_argv;
	job.on_output = on_output;
	st = tvm_agent_exec(agent, &job, &r, &e);
	if (st)
		fprintf(stderr, "embed: %s\n", e.msg);
	tvm_agent_close(agent);
	tvm_vm_stop(vm);
	tvm_vm_wait(vm, &e);
	tvm_vm_destroy(vm);
	return st ? 1 : r.exit_code;
}

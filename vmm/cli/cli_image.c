/* tinyvmm image build: a custom image (the base image plus Debian, pip and
 * npm packages and local files) made by tools/build-rootfs.sh, found next
 * to the binary as the guest kernel is: in a build tree
 * <dir>/tools/build-rootfs.sh with the agent <dir>/build/guest/tinyvmm-agent,
 * installed <dir>/../share/tinyvmm/tools/build-rootfs.sh with
 * <dir>/../share/tinyvmm/tinyvmm-agent. The script checks the options and
 * caches the result; we only find it and hand over. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/cli/cli.h"
#include "vmm/core/file_open.h"

#define IMAGE_MAX_ARGS 64

/* Whether arg is one of the user image's options (--opt or --opt=VALUE). */
static int user_option(const char *arg)
{
	static const char *const names[] = { "--out", "--packages", "--pip", "--npm", "--copy" };

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);

		if (!strncmp(arg, names[i], n) && (arg[n] == 0 || arg[n] == '='))
			return 1;
	}
	return 0;
}

/* Whether --out FILE cannot be written, said in one line now rather than
 * after minutes of building: its folder must exist and be writable, and
 * FILE must not be a folder. */
static bool out_unwritable(const char *out)
{
	char dir[PATH_MAX];
	struct stat st;

	if (strlen(out) >= sizeof(dir) || path_parent(out, dir, sizeof(dir)))
		return fprintf(stderr, "tinyvmm: image build: --out %.100s...: path too long\n", out), true;
	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return fprintf(stderr, "tinyvmm: image build: --out %s: is a folder (give a file name)\n", out), true;
	if (access(dir, W_OK | X_OK) < 0)
		return fprintf(stderr, "tinyvmm: image build: --out %s: its folder %s: %s\n", out, dir,
			       strerror(errno)),
		       true;
	/* root passes access() everywhere: a file made there says (/proc) */
	char probe[PATH_MAX + 32];
	snprintf(probe, sizeof(probe), "%s.tmp-check-%d", out, (int)getpid());
	int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return fprintf(stderr, "tinyvmm: image build: --out %s: %s\n", out, strerror(errno)), true;
	close(fd);
	unlink(probe);
	return false;
}

static volatile sig_atomic_t script_pid;

static void forward(int sig)
{
	if (script_pid > 0)
		kill(script_pid, sig);
}

/* The build script, waited for: its exit status as the documented table
 * has it (0, else EXIT_VM_FAILED; 128+N when signal N ended it). A stop
 * signal to us goes to it too (blocked across the fork, so none is lost
 * before the script's pid is known), and it gets SIGTERM if we die. */
static int run_script(char **args)
{
	static const int stop[] = { SIGTERM, SIGHUP, SIGINT, SIGQUIT };
	struct sigaction sa = { .sa_handler = forward, .sa_flags = SA_RESTART };
	sigset_t all, old;
	pid_t parent = getpid(), pid;
	int st;

	sigemptyset(&all);
	for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
		sigaddset(&all, stop[i]);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(EXIT_VM_FAILED);
		execvp("bash", args);
		fprintf(stderr, "tinyvmm: image build: bash: %s\n", strerror(errno));
		_exit(EXIT_VM_FAILED);
	}
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "tinyvmm: image build: fork: %s\n", strerror(errno));
		return EXIT_VM_FAILED;
	}
	script_pid = pid;
	for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
		sigaction(stop[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return EXIT_VM_FAILED;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st) ? EXIT_VM_FAILED : 0;
}

int cli_cmd_image_build(int argc, char **argv)
{
	static const char *const layouts[][2] = {
		{ "%s/tools/build-rootfs.sh", "%s/build/guest/tinyvmm-agent" },
		{ "%s/../share/tinyvmm/tools/build-rootfs.sh", "%s/../share/tinyvmm/tinyvmm-agent" },
	};
	char exe[PATH_MAX], script[PATH_MAX + 64], agent[PATH_MAX + 64];
	char *args[IMAGE_MAX_ARGS + 8];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *out = NULL;
	int k = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("Usage: tinyvmm image build --out FILE [--packages a,b,c] [--pip x,y] [--npm z]\n"
			       "                           [--copy LOCAL:GUEST]...\n"
			       "The base image plus Debian packages, pip and npm packages (installed system-wide)\n"
			       "and local files; cached, so the same options again cost nothing. Then:\n"
			       "  tinyvmm run --rootfs FILE -- CMD\n"
			       "It needs root and the network (Debian's mirror, PyPI, npm) and takes minutes;\n"
			       "a package that does not exist is said when its installer gets to it. Not\n"
			       "sandboxed: packages' install scripts run as root in a chroot on this host,\n"
			       "so build only from packages and files you trust.\n"
			       "Exit status: 0 built, %d it could not be built (the reason on stderr),\n"
			       "%d a wrong command line.\n",
			       EXIT_VM_FAILED, EXIT_USAGE);
			return 0;
		}
		if (!strncmp(argv[i], "--out=", 6))
			out = argv[i] + 6;
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[i + 1];
		/* Only the user image's options reach the script: its own
		 * --init (which file becomes /sbin/init) and --print-path are
		 * ours to give, and a value is never taken for an option. */
		if (!user_option(argv[i])) {
			fprintf(stderr, "tinyvmm: image build: unknown option '%s' (see tinyvmm image build --help)\n",
				argv[i]);
			return EXIT_USAGE;
		}
		if (!strchr(argv[i], '=') && ++i == argc) {
			fprintf(stderr, "tinyvmm: image build: %s needs a value\n", argv[i - 1]);
			return EXIT_USAGE;
		}
	}
	if (!out || !*out) {
		fprintf(stderr, "tinyvmm: image build needs --out FILE (see tinyvmm image build --help)\n");
		return EXIT_USAGE;
	}
	if (out_unwritable(out))
		return EXIT_VM_FAILED;
	if (argc - 1 > IMAGE_MAX_ARGS) {
		fprintf(stderr, "tinyvmm: image build: at most %d arguments\n", IMAGE_MAX_ARGS);
		return EXIT_USAGE;
	}
	if (n <= 0) {
		fprintf(stderr, "tinyvmm: image build: cannot find tinyvmm's own path\n");
		return EXIT_VM_FAILED;
	}
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	for (unsigned l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		snprintf(script, sizeof(script), layouts[l][0], exe);
		snprintf(agent, sizeof(agent), layouts[l][1], exe);
		if (access(script, R_OK) || access(agent, R_OK))
			continue;
		args[k++] = "bash";
		args[k++] = script;
		args[k++] = "--init";
		args[k++] = agent;
		for (int i = 1; i < argc; i++)
			args[k++] = argv[i];
		args[k] = NULL;
		fflush(stdout);
		return run_script(args);
	}
	fprintf(stderr,
		"tinyvmm: image build: no tools/build-rootfs.sh and agent next to tinyvmm (looked in %s and "
		"%s/../share/tinyvmm)\n",
		exe, exe);
	return EXIT_VM_FAILED;
}

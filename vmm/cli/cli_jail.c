/* --jail for every command that runs a VM (run, snapshot create, and the
 * template snapshot a run makes): the VM's config planned into a jail
 * (vmm/sandbox/jail.h), the VM run by body() in the jailed child; then, on
 * the host, the staged --metrics and --get files moved where the user
 * asked, a snapshot and kept overlays published, the jail removed.
 *
 * What the jailed VMM can no longer reach is read or written for it:
 * --put files are shown read-only in the jail and opened before the
 * lockdown; --get files and the metrics are written into the jail's /run
 * and moved out by this process once the VM has ended. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/cli/cli.h"
#include "vmm/core/err.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_diff.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/snapshot/snapshot_io.h"

#define METRICS_STAGED JAIL_RUN_DIR "/metrics.json"
#define METRICS_MAX (1u << 20) /* what the metrics JSON may be, at most */

/* DIR's state file read (*buf, the caller frees it) and parsed into *f;
 * path: its name. 0 or -errno with e. */
static int read_state(const char *dir, char *path, size_t cap, uint8_t **buf, struct snap_file *f, struct tvm_err *e)
{
	size_t len = 0;
	int r = snap_path(path, cap, dir, SNAP_STATE_FILE, e);

	if (!r)
		r = snap_read_file(path, SNAP_MAX_FILE, buf, &len, e);
	if (!r)
		r = snap_parse(*buf, len, path, f, e);
	if (r) /* e names the file: say which step read it */
		tvm_err_prefix(e, "jail: snapshot");
	return r;
}

/* A restore without --rootfs/--drive opens the images its snapshot names:
 * the jail must show them, so they are named here as if given. */
int cli_snapshot_drives(const char *dir, struct tvm_config *c, struct tvm_err *e)
{
	static struct snap_config sc; /* its paths live as long as the process */
	const struct snap_section *s = NULL;
	struct snap_file f = { 0 };
	char path[PATH_MAX];
	uint8_t *buf = NULL;
	int r = read_state(dir, path, sizeof(path), &buf, &f, e);

	if (!r && !(s = snap_find(&f, SNAP_CONFIG, 0)))
		r = tvm_errf(e, EINVAL, "%s: no config section", path);
	if (!r)
		r = snap_config_read(s, &sc, e);
	for (unsigned i = 0; !r && i < sc.nr_drives; i++)
		c->drives[i] = (struct tvm_drive){ .path = sc.d[i].path,
						   .cow = (int)sc.d[i].cow,
						   .read_only = (int)sc.d[i].read_only };
	if (!r)
		c->nr_drives = sc.nr_drives;
	snap_file_free(&f);
	free(buf);
	return r;
}

/* A diff snapshot maps its base's memory and checks its state file: the
 * jail shows both, read-only, at their resolved paths (the diff names the
 * base resolved). Nothing for a full snapshot. */
static int snapshot_base(struct jail *j, const char *dir, struct tvm_err *e)
{
	static const char *const names[] = { SNAP_STATE_FILE, SNAP_MEM_FILE };
	const struct snap_section *s;
	struct snap_file f = { 0 };
	struct snap_base b;
	char path[PATH_MAX + 8], what[PATH_MAX + 32];
	uint8_t *buf = NULL;
	int r = read_state(dir, path, sizeof(path), &buf, &f, e);

	/* "jail: diff snapshot DIR: its base BASE/mem: why" */
	snprintf(what, sizeof(what), "diff snapshot %s: its base", dir);
	if (!r && (s = snap_find(&f, SNAP_BASE, 0)) && !(r = snap_base_read(s, &b, e)))
		for (unsigned i = 0; !r && i < 2; i++) {
			snprintf(path, sizeof(path), "%s/%s", b.dir, names[i]);
			if (!jail_add_file(j, what, path, e))
				r = -1;
		}
	snap_file_free(&f);
	free(buf);
	return r;
}

/* Each --put LOCAL:GUEST shown read-only; LOCAL becomes its path in the
 * jail (resolved: the jail's working directory is /). */
static int plan_puts(struct jail *j, struct cli_job *job, struct tvm_err *e)
{
	for (unsigned i = 0; i < job->nput; i++) {
		const char *colon = strchr(job->puts[i], ':'), *p;
		char local[PATH_MAX], *s;

		snprintf(local, sizeof(local), "%.*s", (int)(colon - job->puts[i]), job->puts[i]);
		if (!(p = jail_add_file(j, "--put", local, e)))
			return -1;
		if (asprintf(&s, "%s%s", p, colon) < 0)
			return tvm_errf(e, ENOMEM, "jail: out of memory");
		job->puts[i] = s; /* lives as long as the process */
	}
	return 0;
}

/* The jailed child sees no cgroup file system: its cgroup is made out
 * here, before the child enters the jail and builds the VM. */
struct cgroup_start {
	struct tvm_config c; /* the cgroup settings, as given */
	struct tvm_host_cgroup *h;
};

static int cgroup_start(void *ctx, pid_t pid, struct tvm_err *e)
{
	struct cgroup_start *cs = ctx;

	return tvm_cgroup_attach(&cs->c, pid, &cs->h, e);
}

/* The jailed child could not see its cgroup: its metrics say "cgroup":
 * null, and ours are put there (the object tvm_cgroup_metrics wrote). */
static int metrics_add_cgroup(const char *path, const char *cg_json)
{
	static const char key[] = ",\"cgroup\":null";
	char *text = NULL, *at;
	size_t len = 0;
	FILE *in = fopen(path, "re"), *out = NULL;
	int r = 0;

	if (!in)
		return -errno;
	text = malloc(METRICS_MAX + 1);
	if (text)
		len = fread(text, 1, METRICS_MAX + 1, in);
	fclose(in);
	if (!text || len > METRICS_MAX) {
		free(text);
		return text ? -EFBIG : -ENOMEM;
	}
	text[len] = 0;
	at = strstr(text, key);
	if (at && strcmp(cg_json, "null")) {
		out = fopen(path, "we");
		if (!out)
			r = -errno;
		else {
			fprintf(out, "%.*s,\"cgroup\":%s%s", (int)(at - text), text, cg_json, at + sizeof(key) - 1);
			if (fclose(out))
				r = -errno;
		}
	}
	free(text);
	return r;
}

/* A VMM that SIGKILL ended while its cgroup's OOM killer counts a kill
 * went past its memory limit: said so (the user's cue to give more
 * --mem-allowance or less to the guest), TVM_OOM_EXIT. */
static void oom_ended(const struct tvm_host_cgroup *h, int *status, struct tvm_err *e)
{
	uint64_t kills;

	if (*status != 128 + SIGKILL || tvm_cgroup_oom_kills(h, &kills) || !kills)
		return;
	tvm_errf(e, ENOMEM,
		 "the VM went past its cgroup's memory limit (guest RAM + --mem-allowance): the kernel's "
		 "out-of-memory killer ended it");
	*status = TVM_OOM_EXIT;
}

int cli_jail_vm(const struct jail_opts *o, struct tvm_config *c, const char **snapshot, const char **out,
		const char **metrics, struct cli_job *job, int (*body)(void *ctx, struct jail *j), void *ctx)
{
	struct cgroup_start cs = { .c = *c };
	const char *host_metrics = metrics ? *metrics : NULL;
	struct jail_opts jo = *o;
	struct tvm_err e = { 0 };
	struct jail *j;
	char staged[PATH_MAX], cg_json[8192];
	int r, status;

	jo.min_fsize = CLI_FILE_CAP; /* a --get, staged in the jail */
	j = jail_new(&jo, &e);
	r = j ? 0 : -1;

	/* The snapshot directory is checked and made as without the jail;
	 * the jail writes into a stage inside it. */
	if (!r && out && *out)
		r = snap_mkdir(*out, &e);
	if (!r && snapshot && *snapshot && !c->nr_drives)
		r = cli_snapshot_drives(*snapshot, c, &e);
	if (!r && snapshot && *snapshot)
		r = snapshot_base(j, *snapshot, &e);
	if (!r)
		r = jail_plan_vm(j, c, snapshot, out, &e);
	if (!r && job)
		r = plan_puts(j, job, &e);
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", e.msg);
		jail_free(j);
		return EXIT_VM_FAILED;
	}
	if (host_metrics)
		*metrics = METRICS_STAGED;
	if (job && job->nget)
		job->get_stage = JAIL_RUN_DIR;
	c->cgroup.mode = TVM_CGROUP_OFF; /* the child's VM: ours holds it */
	jail_on_start(j, cgroup_start, &cs);
	status = jail_run(j, body, ctx, &e);
	oom_ended(cs.h, &status, &e);
	if (host_metrics && tvm_cgroup_metrics(cs.h, cg_json, sizeof(cg_json)) < 0)
		snprintf(cg_json, sizeof(cg_json), "null");
	tvm_cgroup_release(cs.h);
	if (status < 0 || e.code)
		fprintf(stderr, "tinyvmm: %s\n", e.msg);
	if (status < 0)
		status = EXIT_VM_FAILED;
	if (host_metrics) {
		*metrics = host_metrics;
		r = jail_outside(j, METRICS_STAGED, staged, sizeof(staged));
		if (!r)
			r = metrics_add_cgroup(staged, cg_json);
		if (!r)
			r = cli_move_staged(staged, host_metrics);
		if (r && r != -ENOENT) { /* ENOENT: no VM to report on, said already */
			fprintf(stderr, "tinyvmm: --metrics %s: %s\n", host_metrics, strerror(-r));
			status = status ? status : EXIT_VM_FAILED;
		}
	}
	if (job && job->nget) {
		job->get_stage = NULL;
		if (jail_outside(j, JAIL_RUN_DIR, staged, sizeof(staged)) || cli_job_collect_gets(job, staged))
			status = status ? status : EXIT_VM_FAILED;
	}
	e.code = 0;
	if (jail_finish(j, status == 0, &e)) {
		fprintf(stderr, "tinyvmm: %s\n", e.msg);
		status = status ? status : EXIT_VM_FAILED;
	}
	jail_free(j);
	return status;
}

int cli_jail_lockdown(struct jail *j, struct cli_job *job)
{
	struct tvm_err e = { 0 };

	if (!j)
		return 0;
	if (job && cli_job_open_puts(job))
		return -1;
	if (jail_lockdown(j, &e)) {
		fprintf(stderr, "tinyvmm: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static void removed(const char *dir)
{
	printf("removed %s\n", dir);
}

int cli_jail_dir_check(const char *dir)
{
	if (dir[0] == '/')
		return 0;
	fprintf(stderr, "tinyvmm: --jail-dir %s: must be an absolute path\n", dir);
	return EXIT_USAGE;
}

int cli_cmd_gc(int argc, char **argv)
{
	struct tvm_err e = { 0 };
	const char *dir = NULL;
	int n;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("Usage: tinyvmm gc [--jail-dir DIR]\n"
		       "Removes the jails (default /run/tinyvmm/jail) whose tinyvmm process has ended.\n"
		       "Exit status: 0 done, %d a jail could not be removed, %d a wrong command line.\n",
		       EXIT_VM_FAILED, EXIT_USAGE);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--jail-dir"))
		dir = argv[2];
	else if (argc != 1) {
		/* the word that is wrong, then the usage */
		fprintf(stderr, "tinyvmm: gc: %s '%s' (usage: tinyvmm gc [--jail-dir DIR])\n",
			strcmp(argv[1], "--jail-dir") ? "unknown option"
			: argc == 2                   ? "no DIR after"
						      : "extra argument",
			strcmp(argv[1], "--jail-dir") || argc == 2 ? argv[1] : argv[3]);
		return EXIT_USAGE;
	}
	if (dir && cli_jail_dir_check(dir))
		return EXIT_USAGE;
	n = jail_gc(dir, removed, &e);
	if (n < 0) {
		fprintf(stderr, "tinyvmm: %s\n", e.msg);
		return EXIT_VM_FAILED;
	}
	return 0;
}

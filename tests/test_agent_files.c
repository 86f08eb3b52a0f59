/* The guest agent, run on this host in Unix-socket test mode: PUT_FILE /
 * GET_FILE, file identities, and the static guest build's footprint. */
#include "tests/test_agent_client.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define CHUNK (256u << 10)

static struct ac_conn *c;
static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tinyvmm-agent-files-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ac_start();
	c = ac_open();
}

static void teardown(void)
{
	char cmd[128];

	if (c)
		ac_close(c);
	c = NULL;
	ac_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Entries of directory d, "." and ".." not counted. */
static int entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(dp);
	while ((e = readdir(dp)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(dp);
	return n;
}

static void put_begin(uint32_t id, const char *path, uint32_t mode, uint8_t flags, uint32_t uid)
{
	ac_send(c, &(struct tvp_msg){
			   .type = TVP_PUT_FILE, .id = id, .flags = flags, .put = { mode, uid, uid, tvp_cstr(path) } });
}

/* PUT_FILE + FILE_DATA chunks + FILE_END; returns the reply. */
static void put(uint32_t id, const char *path, const uint8_t *data, size_t len, uint32_t mode, uint8_t flags,
		uint32_t uid, struct tvp_msg *reply)
{
	put_begin(id, path, mode, flags, uid);
	for (size_t off = 0; off < len; off += CHUNK) {
		struct tvp_msg d = { .type = TVP_FILE_DATA, .id = id };

		d.data.data = (struct tvp_bytes){ data + off, (uint32_t)(len - off < CHUNK ? len - off : CHUNK) };
		ac_send(c, &d);
	}
	ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = id, .file_end = { len, 0 } });
	ck_assert_int_eq(ac_recv(c, reply), 1);
	ck_assert_uint_eq(reply->id, id);
}

/* GET_FILE; returns the data (malloc'd, *len set) or NULL with *reply the ERROR. */
static uint8_t *get(uint32_t id, const char *path, uint64_t cap, uint32_t uid, size_t *len, struct tvp_msg *reply)
{
	uint8_t *buf = NULL;

	*len = 0;
	ac_send(c, &(struct tvp_msg){ .type = TVP_GET_FILE, .id = id, .get = { cap, uid, uid, tvp_cstr(path) } });
	for (;;) {
		ck_assert_int_eq(ac_recv(c, reply), 1);
		ck_assert_uint_eq(reply->id, id);
		if (reply->type != TVP_FILE_DATA)
			break;
		buf = realloc(buf, *len + reply->data.data.len + 1);
		memcpy(buf + *len, reply->data.data.p, reply->data.data.len);
		*len += reply->data.data.len;
	}
	if (reply->type == TVP_ERROR) {
		free(buf);
		return NULL;
	}
	ck_assert_uint_eq(reply->type, TVP_FILE_END);
	ck_assert_uint_eq(reply->file_end.size, *len);
	return buf ? buf : malloc(1);
}

START_TEST(put_get_5mib_roundtrip)
{
	size_t len = 5u << 20, got_len;
	uint8_t *data = malloc(len), *got;
	char path[128];
	struct tvp_msg r;
	struct stat st;
	int fd = open("/dev/urandom", O_RDONLY);

	ck_assert_int_eq(read(fd, data, len), (ssize_t)len);
	close(fd);
	snprintf(path, sizeof(path), "%s/a/b/c/blob.bin", dir);
	put(1, path, data, len, 0640, TVP_PUT_MKDIRS, TVP_ID_DEFAULT, &r);
	ck_assert_msg(r.type == TVP_OK, "put failed: %.*s", (int)r.error.message.len, r.error.message.p);
	ck_assert_uint_eq(r.ok.of_type, TVP_PUT_FILE);
	ck_assert_uint_eq(r.ok.value, len);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	ck_assert_uint_eq(st.st_size, len);

	got = get(2, path, len, TVP_ID_DEFAULT, &got_len, &r);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got_len, len);
	ck_assert(!memcmp(got, data, len));
	ck_assert_uint_eq(r.file_end.mode, 0640);
	free(got);

	/* Overwriting truncates; an empty file round-trips too. */
	put(3, path, data, 0, 0600, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	got = get(4, path, 10, TVP_ID_DEFAULT, &got_len, &r);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got_len, 0);
	free(got);
	free(data);
}
END_TEST

START_TEST(get_errors)
{
	char path[128];
	size_t len;
	struct tvp_msg r;

	snprintf(path, sizeof(path), "%s/small", dir);
	put(1, path, (const uint8_t *)"0123456789", 10, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ck_assert_ptr_null(get(2, path, 9, TVP_ID_DEFAULT, &len, &r));
	ck_assert_uint_eq(r.error.code, TVP_ERR_TOO_BIG);
	ck_assert_ptr_null(get(3, "/nonexistent/file", 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert_uint_eq(r.error.code, TVP_ERR_IO);
	ck_assert_int_eq(r.error.sys_errno, ENOENT);
	ck_assert_ptr_null(get(4, dir, 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert_uint_eq(r.error.code, TVP_ERR_IO);
	/* /proc files say size 0: read up to the cap. */
	free(get(5, "/proc/self/status", 1 << 20, TVP_ID_DEFAULT, &len, &r));
	ck_assert_uint_gt(len, 100);
	ck_assert_ptr_null(get(6, "/proc/self/status", 10, TVP_ID_DEFAULT, &len, &r));
	ck_assert_uint_eq(r.error.code, TVP_ERR_TOO_BIG);
	/* not through a procfs magic link: a job's link to /proc/self/fd/N
	 * would reopen another transfer's file, past its directories
	 * (helper-69) */
	ck_assert_ptr_null(get(90, "/proc/self/root/etc/hostname", 4096, TVP_ID_DEFAULT, &len, &r));
	ck_assert_int_eq(r.error.sys_errno, ELOOP);
}
END_TEST

START_TEST(put_errors)
{
	char path[128];
	struct tvp_msg r;

	/* No MKDIRS: the parent must exist. */
	snprintf(path, sizeof(path), "%s/missing/file", dir);
	put(1, path, (const uint8_t *)"x", 1, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_ERROR);
	ck_assert_uint_eq(r.error.code, TVP_ERR_IO);
	ck_assert_int_eq(r.error.sys_errno, ENOENT);
	/* The failed PUT's FILE_DATA and FILE_END were answered: each got an
	 * ERROR (no transfer with that id). */
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_STATE);
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_STATE);

	/* A size mismatch at FILE_END: no half file is left under the name. */
	snprintf(path, sizeof(path), "%s/short", dir);
	put_begin(2, path, 0644, 0, TVP_ID_DEFAULT);
	ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = 2, .file_end = { 5, 0 } });
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_STATE);
	ck_assert_int_eq(access(path, F_OK), -1);

	/* An id in use. */
	put_begin(3, path, 0644, 0, TVP_ID_DEFAULT);
	put_begin(3, path, 0644, 0, TVP_ID_DEFAULT);
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_BUSY);

	/* A directory is not a file. */
	put_begin(4, dir, 0644, 0, TVP_ID_DEFAULT);
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_IO);
}
END_TEST

/* A PUT refused at its open leaves the file that was there; one whose
 * connection goes before FILE_END leaves nothing under the name. */
START_TEST(a_failed_put_removes_only_what_it_wrote)
{
	char keep[128], half[128];
	struct tvp_msg r;
	int fd;

	if (geteuid() != 0) {
		printf("test_agent_files: SKIPPED: another uid's refusal needs root\n");
		return;
	}
	snprintf(keep, sizeof(keep), "%s/keep", dir);
	ck_assert_int_ge(fd = open(keep, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	ck_assert_int_eq(write(fd, "old", 3), 3);
	close(fd);
	put(1, keep, (const uint8_t *)"new", 3, 0644, 0, 1000, &r); /* root's file, uid 1000's PUT */
	ck_assert_uint_eq(r.type, TVP_ERROR);
	ck_assert_int_eq(r.error.sys_errno, EACCES);
	ck_assert_int_eq(ac_recv(c, &r), 1); /* its FILE_DATA and FILE_END: no such transfer */
	ck_assert_int_eq(ac_recv(c, &r), 1);
	uint8_t *got;
	size_t len;
	ck_assert_ptr_nonnull(got = get(2, keep, 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert_uint_eq(len, 3);
	ck_assert(!memcmp(got, "old", 3));
	free(got);
	/* ... also where uid 1000 may make files (it could rename over it):
	 * refused at the open, as a write to the file would be */
	ck_assert_int_eq(chmod(dir, 0777), 0);
	put_begin(8, keep, 0644, 0, 1000);
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.type, TVP_ERROR);
	ck_assert_int_eq(r.error.sys_errno, EACCES);
	ck_assert_int_eq(chmod(dir, 0755), 0);

	/* the host goes mid-file */
	snprintf(half, sizeof(half), "%s/half", dir);
	put_begin(3, half, 0644, 0, TVP_ID_DEFAULT);
	ac_send(c,
		&(struct tvp_msg){ .type = TVP_FILE_DATA, .id = 3, .data = { .data = { (const uint8_t *)"ab", 2 } } });
	ac_close(c);
	c = ac_open(); /* served in order: the agent has dropped the other one by now */
	ck_assert_ptr_null(get(4, half, 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert_int_eq(r.error.sys_errno, ENOENT);
	ck_assert_int_eq(access(half, F_OK), -1);

	/* its directory swapped for a symlink meanwhile (a job's race): the
	 * removal is in the directory it opened in, never through the link */
	char d[128], d2[128], target[128], f[160], victim[160];
	snprintf(d, sizeof(d), "%s/d", dir);
	snprintf(d2, sizeof(d2), "%s/d2", dir);
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(f, sizeof(f), "%s/f", d);
	snprintf(victim, sizeof(victim), "%s/f", target);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	ck_assert_int_eq(mkdir(target, 0755), 0);
	ck_assert_int_ge(fd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	close(fd);
	put_begin(5, f, 0644, 0, TVP_ID_DEFAULT);
	ac_send(c,
		&(struct tvp_msg){ .type = TVP_FILE_DATA, .id = 5, .data = { .data = { (const uint8_t *)"ab", 2 } } });
	ck_assert_ptr_null(get(6, "/nonexistent", 100, TVP_ID_DEFAULT, &len, &r)); /* served in order: opened */
	ck_assert_int_eq(entries(d), 1);                                           /* its new file */
	ck_assert_int_eq(rename(d, d2), 0);
	ck_assert_int_eq(symlink(target, d), 0);
	ac_close(c);
	c = ac_open();
	ck_assert_ptr_null(get(7, "/nonexistent", 100, TVP_ID_DEFAULT, &len, &r)); /* the drop is done */
	ck_assert_int_eq(entries(d2), 0);                                          /* its own half file: gone */
	ck_assert_int_eq(entries(target), 1);                                      /* the link's: untouched */
	ck_assert_int_eq(access(victim, F_OK), 0);
}
END_TEST

/* What a PUT's name holds is the old file or the whole new one: a PUT
 * that fails leaves the old one (and another PUT's that ended meanwhile),
 * one in progress shows the old one, one that ends keeps the old one's
 * mode and leaves no other file. */
START_TEST(a_put_replaces_whole_or_not_at_all)
{
	char path[128], link[128], target[128];
	struct tvp_msg r;
	struct stat st;
	uint8_t *got;
	size_t len;
	int fd;

	snprintf(path, sizeof(path), "%s/f", dir);
	put(1, path, (const uint8_t *)"old", 3, 0750, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ck_assert_int_eq(chmod(path, 0751), 0); /* no umask in the way of what is checked */
	/* a PUT that ends short: the old file stays, whole */
	put_begin(2, path, 0644, 0, TVP_ID_DEFAULT);
	ac_send(c,
		&(struct tvp_msg){ .type = TVP_FILE_DATA, .id = 2, .data = { .data = { (const uint8_t *)"ne", 2 } } });
	ck_assert_ptr_nonnull(got = get(3, path, 100, TVP_ID_DEFAULT, &len, &r)); /* in progress: the old one */
	ck_assert(len == 3 && !memcmp(got, "old", 3));
	free(got);
	ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = 2, .file_end = { 5, 0 } });
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_STATE);
	ck_assert_ptr_nonnull(got = get(4, path, 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert(len == 3 && !memcmp(got, "old", 3));
	free(got);
	/* two PUTs of the name: the one that ends first stays when the other fails */
	put_begin(5, path, 0644, 0, TVP_ID_DEFAULT);
	ac_send(c, &(struct tvp_msg){
			   .type = TVP_FILE_DATA, .id = 5, .data = { .data = { (const uint8_t *)"lost", 4 } } });
	put(6, path, (const uint8_t *)"second", 6, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = 5, .file_end = { 9, 0 } });
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.error.code, TVP_ERR_STATE);
	ck_assert_ptr_nonnull(got = get(7, path, 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert(len == 6 && !memcmp(got, "second", 6));
	free(got);
	/* the file it replaced kept its mode, and nothing else is left */
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0751);
	ck_assert_int_eq(entries(dir), 1);
	/* a symlink at the name is replaced, not written through */
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(target, sizeof(target), "%s/target", dir);
	ck_assert_int_ge(fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	close(fd);
	ck_assert_int_eq(symlink(target, link), 0);
	put(8, link, (const uint8_t *)"x", 1, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISREG(st.st_mode) && st.st_size == 1);
	ck_assert_int_eq(stat(target, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	/* a FIFO is no file to replace */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	put_begin(9, path, 0644, 0, TVP_ID_DEFAULT);
	ck_assert_int_eq(ac_recv(c, &r), 1);
	ck_assert_uint_eq(r.type, TVP_ERROR);
	ck_assert_int_eq(r.error.sys_errno, EINVAL);
	ck_assert_int_eq(entries(dir), 4); /* f, link, target, fifo */
	/* its new file replaced by a job before FILE_END (helper-66: the
	 * job's file was renamed over the name, and the answer was OK) */
	snprintf(path, sizeof(path), "%s/f", dir);
	put_begin(16, path, 0644, 0, TVP_ID_DEFAULT);
	ac_send(c, &(struct tvp_msg){
			   .type = TVP_FILE_DATA, .id = 16, .data = { .data = { (const uint8_t *)"new", 3 } } });
	ck_assert_ptr_null(get(17, "/nonexistent", 100, TVP_ID_DEFAULT, &len, &r)); /* served in order: opened */
	{
		DIR *dp = opendir(dir);
		struct dirent *e;
		char tmp[400];

		ck_assert_ptr_nonnull(dp);
		while ((e = readdir(dp)) && strncmp(e->d_name, ".tinyvmm-put-", 13))
			;
		ck_assert_ptr_nonnull(e);
		snprintf(tmp, sizeof(tmp), "%s/%s", dir, e->d_name);
		closedir(dp);
		ck_assert_int_eq(unlink(tmp), 0);
		ck_assert_int_eq(symlink("/etc/shadow", tmp), 0);
		ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = 16, .file_end = { 3, 0 } });
		ck_assert_int_eq(ac_recv(c, &r), 1);
		ck_assert_uint_eq(r.type, TVP_ERROR);
		ck_assert_msg(memmem(r.error.message.p, r.error.message.len, "replaced meanwhile", 18), "%.*s",
			      (int)r.error.message.len, r.error.message.p);
		ck_assert_int_eq(lstat(path, &st), 0);
		ck_assert(S_ISREG(st.st_mode)); /* the name untouched */
		ck_assert_int_eq(unlink(tmp), 0);
		/* the name a hard link to its new file: the rename does
		 * nothing (and says 0); the data is there, the new name goes */
		put_begin(21, path, 0644, 0, TVP_ID_DEFAULT);
		ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_DATA,
					      .id = 21,
					      .data = { .data = { (const uint8_t *)"linked", 6 } } });
		ck_assert_ptr_null(get(22, "/nonexistent", 100, TVP_ID_DEFAULT, &len, &r));
		dp = opendir(dir);
		while ((e = readdir(dp)) && strncmp(e->d_name, ".tinyvmm-put-", 13))
			;
		ck_assert_ptr_nonnull(e);
		snprintf(tmp, sizeof(tmp), "%s/%s", dir, e->d_name);
		closedir(dp);
		ck_assert_int_eq(unlink(path), 0);
		ck_assert_int_eq(linkat(AT_FDCWD, tmp, AT_FDCWD, path, 0), 0);
		ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = 21, .file_end = { 6, 0 } });
		ck_assert_int_eq(ac_recv(c, &r), 1);
		ck_assert_uint_eq(r.type, TVP_OK);
		ck_assert_int_eq(access(tmp, F_OK), -1);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert(st.st_size == 6 && st.st_nlink == 1);
	}
	/* where no file can be made beside it, a file is written in place:
	 * /proc (a fork's hostname is set so), a directory the identity may
	 * not write */
	put(10, "/proc/self/comm", (const uint8_t *)"tvm-put", 7, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ck_assert_ptr_nonnull(got = get(11, "/proc/self/comm", 100, TVP_ID_DEFAULT, &len, &r));
	ck_assert(len == 8 && !memcmp(got, "tvm-put\n", 8));
	free(got);
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/f", dir);
		ck_assert_int_eq(chmod(path, 0666), 0); /* dir: root's 0755 */
		put(12, path, (const uint8_t *)"by 1000", 7, 0644, 0, 1000, &r);
		ck_assert_uint_eq(r.type, TVP_OK);
		ck_assert_ptr_nonnull(got = get(13, path, 100, TVP_ID_DEFAULT, &len, &r));
		ck_assert(len == 7 && !memcmp(got, "by 1000", 7));
		free(got);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq(st.st_uid, 0); /* the same file */
		/* in a sticky directory, another uid's file it may write: in
		 * place (a rename over it would be refused at the end) */
		char sticky[128];
		snprintf(sticky, sizeof(sticky), "%s/sticky", dir);
		ck_assert_int_eq(mkdir(sticky, 0755), 0);
		ck_assert_int_eq(chmod(sticky, 01777), 0);
		snprintf(path, sizeof(path), "%s/sticky/g", dir);
		ck_assert_int_ge(fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666), 0);
		ck_assert_int_eq(fchown(fd, 2000, 2000), 0);
		ck_assert_int_eq(fchmod(fd, 0666), 0);
		close(fd);
		put(15, path, (const uint8_t *)"sticky", 6, 0644, 0, 1000, &r);
		ck_assert_msg(r.type == TVP_OK, "errno %d", r.error.sys_errno);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert(st.st_uid == 2000 && st.st_size == 6);
		ck_assert_int_eq(entries(sticky), 1);
		/* ... but not one with another hard link: it may be anyone's
		 * (helper-68: a job linked root's file there) */
		char other[160];
		snprintf(other, sizeof(other), "%s/sticky/other-link", dir);
		ck_assert_int_eq(linkat(AT_FDCWD, path, AT_FDCWD, other, 0), 0);
		put(19, path, (const uint8_t *)"linked", 6, 0644, 0, 1000, &r);
		ck_assert_uint_eq(r.type, TVP_ERROR);
		ck_assert_int_eq(r.error.sys_errno, EMLINK);
		ck_assert_int_eq(ac_recv(c, &r), 1); /* its FILE_DATA and FILE_END: no such transfer */
		ck_assert_int_eq(ac_recv(c, &r), 1);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_size, 6); /* "sticky", untouched */
		unlink(other);
		/* root replacing another user's 0666 file gets the mode asked
		 * for, not the file's (which its owner chose) */
		put(20, path, (const uint8_t *)"root's", 6, 0600, 0, 0, &r);
		ck_assert_uint_eq(r.type, TVP_OK);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert(st.st_uid == 0 && (st.st_mode & 0777) == 0600);
		/* a file with a file bind-mounted on it: renaming over it is
		 * EBUSY (helper-66), so it is written in place */
		char src[128];
		snprintf(src, sizeof(src), "%s/src", dir);
		snprintf(path, sizeof(path), "%s/mnt", dir);
		ck_assert_int_ge(fd = open(src, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
		close(fd);
		ck_assert_int_ge(fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
		close(fd);
		if (mount(src, path, NULL, MS_BIND, NULL) == 0) {
			put(18, path, (const uint8_t *)"mounted", 7, 0644, 0, TVP_ID_DEFAULT, &r);
			ck_assert_msg(r.type == TVP_OK, "errno %d", r.error.sys_errno);
			ck_assert_int_eq(umount(path), 0);
			ck_assert_int_eq(stat(src, &st), 0);
			ck_assert_int_eq(st.st_size, 7); /* through the mount: the same file */
		} else {
			printf("test_agent_files: bind mount: %s: that case SKIPPED\n", strerror(errno));
		}
		unlink(src);
		unlink(path);
		/* a new file there stays refused */
		snprintf(path, sizeof(path), "%s/new", dir);
		put(14, path, (const uint8_t *)"x", 1, 0644, 0, 1000, &r);
		ck_assert_uint_eq(r.type, TVP_ERROR);
		ck_assert_int_eq(r.error.sys_errno, EACCES);
		ck_assert_int_eq(ac_recv(c, &r), 1); /* its FILE_DATA and FILE_END: no such transfer */
		ck_assert_int_eq(ac_recv(c, &r), 1);
	}
}
END_TEST

/* Transfers interleave with a running job on the same connection. */
START_TEST(transfer_during_job)
{
	struct ac_out o[AC_MAX_IDS] = { 0 };
	char path[128], go[140], script[320];
	struct tvp_msg r;
	size_t len;
	uint8_t *got;

	/* The job prints only once told to (the file "go"), so that its output
	 * cannot come between the GET's frames, which get() reads in a row. */
	snprintf(path, sizeof(path), "%s/shared", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	snprintf(script, sizeof(script), "while [ ! -e %s ]; do sleep 0.05; done; cat %s", go, path);
	ac_exec(c, 7, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", script) });
	put(1, path, (const uint8_t *)"from the host\n", 14, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	got = get(2, path, 100, TVP_ID_DEFAULT, &len, &r);
	ck_assert_uint_eq(len, 14);
	free(got);
	put(3, go, (const uint8_t *)"", 0, 0644, 0, TVP_ID_DEFAULT, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ac_wait(c, o, 7);
	ck_assert_str_eq(o[7].out, "from the host\n");
	ac_out_free(o, AC_MAX_IDS);
}
END_TEST

/* File operations run with the requested identity: a user cannot make the
 * agent write where that user could not. */
START_TEST(file_identity)
{
	char path[128];
	struct tvp_msg r;
	struct stat st;
	size_t len;

	if (geteuid() != 0)
		return;
	snprintf(path, sizeof(path), "%s/user/file", dir);
	put(1, path, (const uint8_t *)"u", 1, 0600, TVP_PUT_MKDIRS, 1000, &r);
	ck_assert_uint_eq(r.type, TVP_ERROR); /* dir is root's 0755: no mkdir as 1000 */
	ck_assert_int_eq(r.error.sys_errno, EACCES);
	ck_assert_int_eq(ac_recv(c, &r), 1); /* FILE_DATA: no such transfer */
	ck_assert_int_eq(ac_recv(c, &r), 1); /* FILE_END */
	ck_assert_int_eq(chmod(dir, 0777), 0);
	put(2, path, (const uint8_t *)"u", 1, 0600, TVP_PUT_MKDIRS, 1000, &r);
	ck_assert_uint_eq(r.type, TVP_OK);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_uid, 1000);
	ck_assert_uint_eq(st.st_gid, 1000);
	snprintf(path, sizeof(path), "%s/user", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_uid, 1000);
	/* /proc/sys checks the effective uid, not the file system one: a
	 * root-only sysctl stays root's (helper-68: read and written as
	 * uid 1000); a harmless one (cad_pid, 0600) is read here */
	ck_assert_ptr_null(get(5, "/proc/sys/kernel/cad_pid", 10, 1000, &len, &r));
	ck_assert_int_eq(r.error.sys_errno, EACCES);
	free(get(6, "/proc/sys/kernel/cad_pid", 10, 0, &len, &r));
	ck_assert_uint_gt(len, 0);
	/* uid 1001 cannot read 1000's 0600 file; root can. */
	snprintf(path, sizeof(path), "%s/user/file", dir);
	ck_assert_ptr_null(get(3, path, 10, 1001, &len, &r));
	ck_assert_int_eq(r.error.sys_errno, EACCES);
	free(get(4, path, 10, 0, &len, &r));
	ck_assert_uint_eq(len, 1);
}
END_TEST

/* The guest build: small binary, small idle footprint. */
START_TEST(static_build_footprint)
{
	const char *bin = getenv("TINYVMM_AGENT_STATIC");
	struct ac_out o[AC_MAX_IDS];
	struct stat st;
	long rss;

	if (!bin || !*bin)
		bin = "build/guest/tinyvmm-agent";
	ck_assert_msg(stat(bin, &st) == 0, "static agent %s missing (make agent)", bin);
	ck_assert_msg(st.st_size < (1 << 20), "static agent is %lld bytes", (long long)st.st_size);
	ac_close(c);
	ac_stop();
	ac_start_bin(bin);
	c = ac_open();
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("echo", "static") }, o);
	ck_assert_str_eq(o[1].out, "static\n");
	ac_out_free(o, AC_MAX_IDS);
	rss = ac_status_kib(ac_agent_pid, "VmRSS");
	ck_assert_msg(rss > 0 && rss < 1024, "static agent RSS %ld KiB", rss);
}
END_TEST

static Suite *files_suite(void)
{
	Suite *s = suite_create("agent_files");
	TCase *tc = tcase_create("files");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, put_get_5mib_roundtrip);
	tcase_add_test(tc, get_errors);
	tcase_add_test(tc, put_errors);
	tcase_add_test(tc, a_failed_put_removes_only_what_it_wrote);
	tcase_add_test(tc, a_put_replaces_whole_or_not_at_all);
	tcase_add_test(tc, transfer_during_job);
	tcase_add_test(tc, file_identity);
	tcase_add_test(tc, static_build_footprint);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(files_suite());
}

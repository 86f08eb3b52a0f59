/* The login-like part of a job's environment: what a shell user expects
 * ($HOME, $USER, a UTF-8 locale, ~/.local/bin on PATH for `pip install`
 * and `npm install -g`), from the job user's /etc/passwd entry. The kernel
 * starts init with HOME=/ only. */
#include "guest/agent.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PASSWD_MAX (256u << 10)

/* Copy field [p, end) into dst of size len; false if it does not fit. */
static bool field_copy(char *dst, size_t len, const char *p, const char *end)
{
	size_t n = (size_t)(end - p);

	if (n >= len)
		return false;
	memcpy(dst, p, n);
	dst[n] = 0;
	return true;
}

bool ident_parse_passwd(const char *text, size_t len, uint32_t uid, struct ident_pw *pw)
{
	const char *end = text + len, *line, *eol;

	for (line = text; line < end; line = eol + 1) {
		const char *f[7];
		unsigned nf = 0;
		char *num_end;
		unsigned long v;

		eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		/* name:passwd:uid:gid:gecos:home:shell */
		f[nf++] = line;
		for (const char *p = line; p < eol && nf < 7; p++)
			if (*p == ':')
				f[nf++] = p + 1;
		if (nf != 7 || f[2] == f[3] - 1 || f[2][0] < '0' || f[2][0] > '9')
			continue;
		v = strtoul(f[2], &num_end, 10);
		if (num_end != f[3] - 1 || v != uid)
			continue;
		if (f[1] - 1 == f[0] || !field_copy(pw->name, sizeof(pw->name), f[0], f[1] - 1) ||
		    !field_copy(pw->home, sizeof(pw->home), f[5], f[6] - 1) ||
		    !field_copy(pw->shell, sizeof(pw->shell), f[6], eol))
			return false;
		return pw->home[0] == '/';
	}
	return false;
}

/* The passwd entry of uid from the file at path. */
static bool ident_lookup(const char *path, uint32_t uid, struct ident_pw *pw)
{
	char *buf = malloc(PASSWD_MAX);
	size_t len = 0;
	ssize_t n = 0;
	bool found = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && buf) {
		while (len < PASSWD_MAX && (n = read(fd, buf + len, PASSWD_MAX - len)) > 0)
			len += (size_t)n;
		found = n >= 0 && ident_parse_passwd(buf, len, uid, pw);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return found;
}

void ident_init(struct job_ident *id, uint32_t uid, const char *path, const char *base_path)
{
	unsigned k = 0;
	bool found = ident_lookup(path, uid, &id->pw);
	int n;

	if (!found)
		id->pw = (struct ident_pw){ .home = "/" };
	id->cwd = id->pw.home;
	snprintf(id->e_home, sizeof(id->e_home), "HOME=%s", id->pw.home);
	id->env[k++] = id->e_home;
	if (found) {
		snprintf(id->e_user, sizeof(id->e_user), "USER=%s", id->pw.name);
		snprintf(id->e_logname, sizeof(id->e_logname), "LOGNAME=%s", id->pw.name);
		id->env[k++] = id->e_user;
		id->env[k++] = id->e_logname;
		if (id->pw.shell[0]) {
			snprintf(id->e_shell, sizeof(id->e_shell), "SHELL=%s", id->pw.shell);
			id->env[k++] = id->e_shell;
		}
	}
	id->env[k++] = "LANG=C.UTF-8";
	/* Where pip --user and our npmrc's prefix put commands. A home of "/"
	 * has no .local of its own; a PATH too long to extend stays as is. */
	if (base_path && found && strcmp(id->pw.home, "/")) {
		n = snprintf(id->e_path, sizeof(id->e_path), "PATH=%s/.local/bin:%s", id->pw.home, base_path);
		if (n > 0 && (size_t)n < sizeof(id->e_path))
			id->env[k++] = id->e_path;
	}
	id->env[k] = NULL;
}

/* The login-like job environment of the agent as the guest's init
 * (guest/agent_env.c): passwd parsing and the entries made from it. */
#include <check.h>
#include <stdlib.h>

#include "guest/agent_env.c"
#include "tests/unit.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
			     "short:x:5:5:gecos:/home/short\n"      /* 6 fields */
			     "noid:x::9:gecos:/home/noid:/bin/sh\n" /* empty uid */
			     "badid:x:10x0:9::/home/badid:/bin/sh\n"
			     ":x:7:7::/home/noname:/bin/sh\n"
			     "relhome:x:8:8::home/rel:/bin/sh\n"
			     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
			     "sandbox:*:1000:1000:sandbox:/home/sandbox:/bin/bash\n"
			     "noshell:x:1001:1001:::\n"
			     "last:x:4000000000:1::/home/last:/bin/sh"; /* no newline, uid > 2^31 */

static bool parse(uint32_t uid, struct ident_pw *pw)
{
	return ident_parse_passwd(passwd, sizeof(passwd) - 1, uid, pw);
}

START_TEST(parse_entries)
{
	struct ident_pw pw;

	ck_assert(parse(1000, &pw));
	ck_assert_str_eq(pw.name, "sandbox");
	ck_assert_str_eq(pw.home, "/home/sandbox");
	ck_assert_str_eq(pw.shell, "/bin/bash");
	ck_assert(parse(0, &pw));
	ck_assert_str_eq(pw.home, "/root");
	ck_assert(parse(4000000000u, &pw));
	ck_assert_str_eq(pw.name, "last");
	ck_assert_str_eq(pw.shell, "/bin/sh");
	ck_assert(parse(65534, &pw));
	ck_assert_str_eq(pw.home, "/nonexistent");
}
END_TEST

START_TEST(parse_rejects)
{
	struct ident_pw pw;
	char *big;

	ck_assert(!parse(5, &pw));    /* too few fields */
	ck_assert(!parse(9, &pw));    /* nobody has uid 9: "noid" has none */
	ck_assert(!parse(10, &pw));   /* "10x0" is not 10 */
	ck_assert(!parse(7, &pw));    /* no name */
	ck_assert(!parse(8, &pw));    /* relative home */
	ck_assert(!parse(1001, &pw)); /* empty home */
	ck_assert(!parse(1234, &pw));
	ck_assert(!ident_parse_passwd("", 0, 0, &pw));
	/* Only the first len bytes count. */
	ck_assert(!ident_parse_passwd(passwd, 10, 0, &pw));

	/* A name that does not fit is no entry (not a truncated one). */
	big = malloc(IDENT_NAME_MAX + 64);
	memset(big, 'a', IDENT_NAME_MAX + 1);
	strcpy(big + IDENT_NAME_MAX + 1, ":x:3:3::/h:/bin/sh");
	ck_assert(!ident_parse_passwd(big, strlen(big), 3, &pw));
	free(big);
}
END_TEST

static char tmp_passwd[] = "/tmp/tinyvmm-test-passwd-XXXXXX";

static void write_passwd(void)
{
	int fd = mkstemp(tmp_passwd);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, passwd, sizeof(passwd) - 1), (ssize_t)sizeof(passwd) - 1);
	close(fd);
}

static void env_is(struct job_ident *id, const char *const *want)
{
	size_t i = 0;

	for (; want[i]; i++) {
		ck_assert_msg(id->env[i], "missing %s", want[i]);
		ck_assert_str_eq(id->env[i], want[i]);
	}
	ck_assert_msg(!id->env[i], "extra %s", id->env[i]);
}

START_TEST(ident_env)
{
	struct job_ident *id = malloc(sizeof(*id));

	write_passwd();
	ident_init(id, 1000, tmp_passwd, "/usr/local/bin:/usr/bin:/bin");
	env_is(id, (const char *const[]){ "HOME=/home/sandbox", "USER=sandbox", "LOGNAME=sandbox", "SHELL=/bin/bash",
					  "LANG=C.UTF-8", "PATH=/home/sandbox/.local/bin:/usr/local/bin:/usr/bin:/bin",
					  NULL });
	ck_assert_str_eq(id->cwd, "/home/sandbox");

	ident_init(id, 0, tmp_passwd, "/usr/bin");
	ck_assert_str_eq(id->env[0], "HOME=/root");
	ck_assert_str_eq(id->env[5], "PATH=/root/.local/bin:/usr/bin");
	ck_assert_str_eq(id->cwd, "/root");

	/* No entry: HOME=/ (as the kernel gives init), the base PATH stays. */
	ident_init(id, 4242, tmp_passwd, "/usr/bin");
	env_is(id, (const char *const[]){ "HOME=/", "LANG=C.UTF-8", NULL });
	ck_assert_str_eq(id->cwd, "/");
	ident_init(id, 1000, "/nonexistent/passwd", "/usr/bin");
	env_is(id, (const char *const[]){ "HOME=/", "LANG=C.UTF-8", NULL });

	/* No base PATH: none made up. */
	ident_init(id, 1000, tmp_passwd, NULL);
	ck_assert_str_eq(id->env[4], "LANG=C.UTF-8");
	ck_assert_ptr_null(id->env[5]);
	unlink(tmp_passwd);
	free(id);
}
END_TEST

START_TEST(ident_long_path)
{
	struct job_ident *id = malloc(sizeof(*id));
	char *base = malloc(IDENT_PATH_MAX + 1);

	write_passwd();
	memset(base, 'p', IDENT_PATH_MAX);
	base[IDENT_PATH_MAX] = 0;
	/* ~/.local/bin would not fit in front: no PATH entry, the base one stays. */
	ident_init(id, 1000, tmp_passwd, base);
	ck_assert_str_eq(id->env[4], "LANG=C.UTF-8");
	ck_assert_ptr_null(id->env[5]);
	unlink(tmp_passwd);
	free(base);
	free(id);
}
END_TEST

static Suite *env_suite(void)
{
	Suite *s = suite_create("agent_env");
	TCase *tc = tcase_create("ident");

	tcase_add_test(tc, parse_entries);
	tcase_add_test(tc, parse_rejects);
	tcase_add_test(tc, ident_env);
	tcase_add_test(tc, ident_long_path);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(env_suite());
}

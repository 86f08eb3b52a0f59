/* The terminal for an interactive console: raw while the VM runs,
 * restored at exit. */
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include "vmm/cli/cli.h"

/* The settings to restore at exit: process-wide, as the terminal is. */
static struct termios saved_tio;
static int tio_saved;

static void restore_terminal(void)
{
	if (tio_saved)
		tcsetattr(0, TCSANOW, &saved_tio);
}

/* Raw input so keys reach the guest as typed (the guest echoes), but keep
 * ISIG so Ctrl-C still stops the VMM. */
void cli_term_raw(void)
{
	struct termios t;

	if (tcgetattr(0, &saved_tio) < 0)
		return;
	tio_saved = 1;
	atexit(restore_terminal);
	t = saved_tio;
	t.c_iflag &= ~(unsigned)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
	t.c_lflag &= ~(unsigned)(ECHO | ECHONL | ICANON | IEXTEN);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	tcsetattr(0, TCSANOW, &t);
}

// SPDX-License-Identifier: MIT
/* Specification of the restart decision after an interrupted wait
 * (src/sig_restart.c): restart only when every handler that could have
 * run has SA_RESTART, as the kernel has it and as it was installed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "real.h"
#include "sig_restart.h"

static void on_signal(int sig)
{
	(void)sig;
}

/* Installs a handler for sig with flags, and notes it as the wrapper does. */
static void install(int sig, int flags)
{
	struct sigaction act = { .sa_handler = on_signal, .sa_flags = flags };

	sigemptyset(&act.sa_mask);
	assert_int_equal(sigaction(sig, &act, NULL), 0);
	sig_restart_note(sig, true, flags & SA_RESTART);
}

static void reset(int sig)
{
	signal(sig, SIG_DFL);
	sig_restart_note(sig, false, false);
}

static int reset_all(void **state)
{
	sigset_t none;

	(void)state;
	reset(SIGALRM);
	reset(SIGUSR1);
	reset(SIGUSR2);
	reset(SIGSEGV);
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	return 0;
}

static void no_handler_means_no_restart(void **state)
{
	(void)state;
	assert_false(sig_restart_allowed());
}

static void sa_restart_handler_restarts(void **state)
{
	(void)state;
	install(SIGALRM, SA_RESTART);
	assert_true(sig_restart_allowed());
}

static void handler_without_sa_restart_does_not(void **state)
{
	(void)state;
	install(SIGALRM, SA_RESTART);
	install(SIGUSR1, 0);
	assert_false(sig_restart_allowed());
}

static void blocked_signal_does_not_count(void **state)
{
	sigset_t usr1;

	(void)state;
	install(SIGALRM, SA_RESTART);
	install(SIGUSR1, 0);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	assert_true(sig_restart_allowed());
}

static void fault_handler_does_not_count(void **state)
{
	(void)state;
	install(SIGALRM, SA_RESTART);
	install(SIGSEGV, 0);
	assert_true(sig_restart_allowed());
}

static void one_shot_handler_counts_once_reset(void **state)
{
	(void)state;
	install(SIGALRM, SA_RESTART);
	install(SIGUSR2, SA_RESETHAND);
	/* As the kernel leaves it after the delivery: */
	signal(SIGUSR2, SIG_DFL);
	assert_false(sig_restart_allowed());
}

static void one_shot_handler_with_sa_restart_restarts_once_reset(void **state)
{
	(void)state;
	install(SIGUSR2, SA_RESTART | SA_RESETHAND);
	signal(SIGUSR2, SIG_DFL);
	assert_true(sig_restart_allowed());
}

static void reset_handler_counts_for_one_decision(void **state)
{
	(void)state;
	install(SIGALRM, SA_RESTART);
	install(SIGUSR2, SA_RESETHAND);
	signal(SIGUSR2, SIG_DFL);
	assert_false(sig_restart_allowed());
	assert_true(sig_restart_allowed());
}

static void live_handler_outweighs_the_note(void **state)
{
	struct sigaction act = { .sa_handler = on_signal,
				 .sa_flags = SA_RESTART };

	(void)state;
	install(SIGUSR1, 0);
	sigemptyset(&act.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &act, NULL), 0);
	assert_true(sig_restart_allowed());
}

static void handler_put_back_to_default_counts_no_more(void **state)
{
	(void)state;
	install(SIGALRM, SA_RESTART);
	install(SIGUSR1, 0);
	reset(SIGUSR1);
	assert_true(sig_restart_allowed());
}

static void handler_installed_unnoted_counts(void **state)
{
	struct sigaction act = { .sa_handler = on_signal };

	(void)state;
	install(SIGALRM, SA_RESTART);
	sigemptyset(&act.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &act, NULL), 0);
	assert_false(sig_restart_allowed());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(no_handler_means_no_restart, reset_all),
		cmocka_unit_test_setup(sa_restart_handler_restarts, reset_all),
		cmocka_unit_test_setup(handler_without_sa_restart_does_not,
				       reset_all),
		cmocka_unit_test_setup(blocked_signal_does_not_count,
				       reset_all),
		cmocka_unit_test_setup(fault_handler_does_not_count, reset_all),
		cmocka_unit_test_setup(one_shot_handler_counts_once_reset,
				       reset_all),
		cmocka_unit_test_setup(
			one_shot_handler_with_sa_restart_restarts_once_reset,
			reset_all),
		cmocka_unit_test_setup(reset_handler_counts_for_one_decision,
				       reset_all),
		cmocka_unit_test_setup(live_handler_outweighs_the_note,
				       reset_all),
		cmocka_unit_test_setup(
			handler_put_back_to_default_counts_no_more, reset_all),
		cmocka_unit_test_setup(handler_installed_unnoted_counts,
				       reset_all),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}

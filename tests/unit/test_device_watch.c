// SPDX-License-Identifier: MIT
/* Specification of how a kernel uevent is read for a removed RDMA verbs
 * device (src/device_watch.c).  The messages are the kernel's shape:
 * "ACTION@DEVPATH", then KEY=VALUE fields, each NUL-terminated.  The
 * watch itself, a device deleted under a live process, runs in the
 * fabric (tests/fabric/test-device-release.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "device_watch.h"

/* The message literal's bytes, its final NUL included. */
#define MSG(s) s, sizeof(s)

static void removal_of_a_verbs_device_is_recognised(void **state)
{
	(void)state;
	assert_true(device_uevent_changes_verbs(
		MSG("remove@/devices/virtual/infiniband_verbs/uverbs1\0"
		    "ACTION=remove\0"
		    "DEVPATH=/devices/virtual/infiniband_verbs/uverbs1\0"
		    "SUBSYSTEM=infiniband_verbs\0"
		    "MAJOR=231\0MINOR=193\0DEVNAME=infiniband/uverbs1\0"
		    "SEQNUM=4242")));
}

static void addition_of_a_verbs_device_is_recognised(void **state)
{
	(void)state;
	assert_true(device_uevent_changes_verbs(
		MSG("add@/devices/virtual/infiniband_verbs/uverbs1\0"
		    "ACTION=add\0SUBSYSTEM=infiniband_verbs\0SEQNUM=4243")));
}

static void another_action_on_a_verbs_device_is_not_recognised(void **state)
{
	(void)state;
	assert_false(device_uevent_changes_verbs(
		MSG("change@/devices/virtual/infiniband_verbs/uverbs1\0"
		    "ACTION=change\0SUBSYSTEM=infiniband_verbs\0SEQNUM=4246")));
}

static void removal_in_another_subsystem_is_not_recognised(void **state)
{
	(void)state;
	assert_false(device_uevent_changes_verbs(
		MSG("remove@/devices/virtual/net/vethB\0ACTION=remove\0"
		    "SUBSYSTEM=net\0INTERFACE=vethB\0SEQNUM=4244")));
	assert_false(device_uevent_changes_verbs(
		MSG("remove@/devices/virtual/infiniband/rxe1\0"
		    "ACTION=remove\0SUBSYSTEM=infiniband\0SEQNUM=4245")));
}

static void a_field_must_match_whole(void **state)
{
	(void)state;
	assert_false(device_uevent_changes_verbs(
		MSG("ACTION=removed\0SUBSYSTEM=infiniband_verbs")));
	assert_false(device_uevent_changes_verbs(
		MSG("ACTION=remove\0SUBSYSTEM=infiniband_verbsX")));
	assert_false(device_uevent_changes_verbs(
		MSG("XACTION=remove\0SUBSYSTEM=infiniband_verbs")));
}

static void a_message_is_read_within_its_length(void **state)
{
	static const char msg[] = "ACTION=remove\0SUBSYSTEM=infiniband_verbs";
	char unterminated[sizeof(msg) - 1];

	(void)state;
	/* Cut inside the last field: not the field. */
	assert_false(device_uevent_changes_verbs(msg, sizeof(msg) - 5));
	/* The last field without its NUL still counts, read to the end. */
	memcpy(unterminated, msg, sizeof(unterminated));
	assert_true(device_uevent_changes_verbs(unterminated,
						sizeof(unterminated)));
	assert_false(device_uevent_changes_verbs(msg, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(removal_of_a_verbs_device_is_recognised),
		cmocka_unit_test(addition_of_a_verbs_device_is_recognised),
		cmocka_unit_test(
			another_action_on_a_verbs_device_is_not_recognised),
		cmocka_unit_test(
			removal_in_another_subsystem_is_not_recognised),
		cmocka_unit_test(a_field_must_match_whole),
		cmocka_unit_test(a_message_is_read_within_its_length),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the calls that change the process's credentials:
 * the set*id family, setfsuid and setfsgid, setgroups and initgroups,
 * capset, and the prctl() options that change capabilities or secure
 * bits.  The kernel refuses writes to an RDMA descriptor from a process
 * whose credentials changed since it was opened (any new credentials,
 * even equal ones), so the process gives up RDMA before the change
 * (track_credentials_change()); then libc makes it.  glibc's initgroups
 * calls setgroups internally, without a wrapper, so it is wrapped too.
 * The same calls made through syscall() are caught there (shim.c).
 */
#include <grp.h>
#include <stdarg.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "real.h"
#include "shim.h"
#include "track.h"

static void before_change(void)
{
	shim_ensure_init();
	track_credentials_change();
}

SHIM_EXPORT int setuid(uid_t uid)
{
	before_change();
	return real.setuid(uid);
}

SHIM_EXPORT int setgid(gid_t gid)
{
	before_change();
	return real.setgid(gid);
}

SHIM_EXPORT int seteuid(uid_t euid)
{
	before_change();
	return real.seteuid(euid);
}

SHIM_EXPORT int setegid(gid_t egid)
{
	before_change();
	return real.setegid(egid);
}

SHIM_EXPORT int setreuid(uid_t ruid, uid_t euid)
{
	before_change();
	return real.setreuid(ruid, euid);
}

SHIM_EXPORT int setregid(gid_t rgid, gid_t egid)
{
	before_change();
	return real.setregid(rgid, egid);
}

SHIM_EXPORT int setresuid(uid_t ruid, uid_t euid, uid_t suid)
{
	before_change();
	return real.setresuid(ruid, euid, suid);
}

SHIM_EXPORT int setresgid(gid_t rgid, gid_t egid, gid_t sgid)
{
	before_change();
	return real.setresgid(rgid, egid, sgid);
}

SHIM_EXPORT int setgroups(size_t size, const gid_t *list)
{
	before_change();
	return real.setgroups(size, list);
}

SHIM_EXPORT int initgroups(const char *user, gid_t group)
{
	before_change();
	return real.initgroups(user, group);
}

SHIM_EXPORT int setfsuid(uid_t fsuid)
{
	before_change();
	return real.setfsuid(fsuid);
}

SHIM_EXPORT int setfsgid(gid_t fsgid)
{
	before_change();
	return real.setfsgid(fsgid);
}

/* glibc exports it; libcap's <sys/capability.h> declares it. */
int capset(void *header, const void *data);

SHIM_EXPORT int capset(void *header, const void *data)
{
	before_change();
	return real.capset(header, data);
}

/* The prctl() options that make new credentials. */
static bool prctl_changes(long option, unsigned long arg2)
{
	switch (option) {
	case PR_SET_KEEPCAPS:
	case PR_SET_SECUREBITS:
	case PR_CAPBSET_DROP:
		return true;
	case PR_CAP_AMBIENT:
		return arg2 != PR_CAP_AMBIENT_IS_SET;
	default:
		return false;
	}
}

SHIM_EXPORT int prctl(int option, ...)
{
	unsigned long arg[4];
	va_list ap;
	int i;

	/* As libc's own: four more argument registers, whatever it uses. */
	va_start(ap, option);
	for (i = 0; i < 4; i++)
		arg[i] = va_arg(ap, unsigned long);
	va_end(ap);
	shim_ensure_init();
	if (prctl_changes(option, arg[0]))
		track_credentials_change();
	return real.prctl(option, arg[0], arg[1], arg[2], arg[3]);
}

void shim_cred_syscall(long number, const long *arg)
{
	switch (number) {
	case SYS_setuid:
	case SYS_setgid:
	case SYS_setreuid:
	case SYS_setregid:
	case SYS_setresuid:
	case SYS_setresgid:
	case SYS_setgroups:
	case SYS_setfsuid:
	case SYS_setfsgid:
	case SYS_capset:
		break;
	case SYS_prctl:
		if (prctl_changes(arg[0], (unsigned long)arg[1]))
			break;
		return;
	default:
		return;
	}
	track_credentials_change();
}

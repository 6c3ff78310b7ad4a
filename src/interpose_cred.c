// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the calls that change the process's credentials:
 * the set*id family, setgroups and initgroups.  The kernel refuses writes
 * to an RDMA descriptor from a process whose credentials changed since
 * it was opened, so the process gives up RDMA before the change
 * (track_credentials_change()); then libc makes it.  glibc's initgroups
 * calls setgroups internally, without a wrapper, so it is wrapped too.
 */
#include <grp.h>
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

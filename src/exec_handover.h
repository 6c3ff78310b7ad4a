/* SPDX-License-Identifier: MIT */
/*
 * Connections handed over an exec.
 *
 * A listener that survives an exec (socket activation, inetd's wait mode:
 * the activator waits for the first connection, then execs the server
 * with the listener) may hold connections that its CM listener accepted
 * and accept() has not taken.  Their clients are on RDMA with this
 * process, and the exec ends its queue pairs.  The exec'd program, if it
 * is preloaded too, moves each of them to TCP from its first byte when it
 * accepts it (conn_move_unclaimed()), as a prefork worker does with its
 * owner's.  It learns of them from EXEC_HANDOVER_ENV, which the exec
 * carries: the pid (an exec keeps it, so no other process takes the list
 * for its own), a deadline, and per connection the listener's port and
 * the client's TCP source.
 *
 * Contract: exec_handover_env() and exec_handover_env_free() in the
 * process about to exec; exec_handover_load() once, at start;
 * exec_handover_claim() and exec_handover_waiting() on any thread, and
 * in a fork child (they take no lock).  The encoding and decoding are
 * pure, for the unit tests.
 */
#ifndef ROCESHIM_EXEC_HANDOVER_H
#define ROCESHIM_EXEC_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <roceshim/stats.h>

#define EXEC_HANDOVER_ENV "ROCESHIM_EXEC_PENDING"
/*
 * The most connections one exec hands over; those beyond are reset.  The
 * list is one environment string, and the kernel takes at most 128 KiB
 * in one (MAX_ARG_STRLEN).
 */
#define EXEC_HANDOVER_MAX 2048
/*
 * How long the new image looks for them: as long as a connection may
 * wait in a listener's queue (handshake_server.c's PENDING_GONE_MS).
 */
#define EXEC_HANDOVER_MS 600000

struct exec_handover_entry {
	struct roceshim_stats_endpoint source; /* the client's TCP source */
	uint16_t local_port;		       /* the listener's port */
	bool claimed;
};

struct exec_handover {
	pid_t pid;
	int64_t deadline_ms; /* of clock_ms() */
	size_t count;
	struct exec_handover_entry *entries;
};

/*
 * "NAME=value" for h, in a new string; NULL when memory is short or h
 * has no entry.
 */
char *exec_handover_encode(const struct exec_handover *h);
/*
 * Decodes value (what follows "NAME=") into h, whose entries the caller
 * frees.  0, -EINVAL for anything malformed (h is then empty), -ENOMEM.
 */
int exec_handover_decode(const char *value, struct exec_handover *h);

/*
 * The environment to exec with: vars (count "NAME=value" strings of
 * EXEC_HANDOVER_ENV, from exec_handover_encode(), or SHARE_ENV, from
 * share_export()) first, then envp without any entry of those two names.
 * The new image must be preloaded to use them, and an activator that
 * builds its program's environment afresh (systemd-socket-activate)
 * drops LD_PRELOAD: unless LD_PRELOAD names library's file already,
 * library (this library's path; NULL: unknown) is put first in it.  NULL
 * when memory is short.  Free it with exec_handover_env_free(), which
 * frees vars too.
 */
char **exec_handover_env(char *const envp[], char *const vars[], size_t count,
			 const char *library);
void exec_handover_env_free(char **env);

/*
 * At start: takes the list the exec handed over, if it is this process's
 * and not past its deadline, and removes it from the environment, which
 * the program must not see changed.
 */
void exec_handover_load(void);
/*
 * accept() returned a connection from source on local_port: whether it is
 * one handed over (then it is no longer listed).
 */
bool exec_handover_claim(const struct roceshim_stats_endpoint *source,
			 uint16_t local_port);
/* Whether any handed-over connection may still be accepted. */
bool exec_handover_waiting(void);

#endif /* ROCESHIM_EXEC_HANDOVER_H */

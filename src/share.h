/* SPDX-License-Identifier: MIT */
/*
 * Upgraded connections shared with fork children.
 *
 * An upgraded connection belongs to the process that made it, its owner:
 * only there can its queue pair be used.  A fork child inherits the fd,
 * and over TCP it could use the connection as well as its parent.  So
 * every upgraded connection has a slot in memory that the owner shares
 * with its descendants (a MAP_SHARED mapping, inherited across fork).  A
 * descendant that uses an inherited connection asks the owner, through the
 * slot, to move it to its kernel TCP socket, and waits until the owner says
 * that it has (or could not).  The owner learns of a request from a datagram on
 * a socket of its own, bound to an abstract unix name that the shared memory
 * records; nothing that a child may have closed or reused carries it.
 *
 * A connection that a listener accepted on the RDMA CM, and that accept()
 * has not claimed yet, is pending: its slot says so, with the TCP source
 * the client declared.  A prefork worker (a descendant that accepts on
 * the inherited listener) claims it there; the connection then moves to
 * TCP from its first byte (conn_move_unclaimed()).
 *
 * The region is a memfd where one can be had.  An exec in a descendant,
 * or a posix_spawn, that keeps such a listener (a supervisor that starts
 * its workers as new programs) hands a copy of it to the new image, named
 * in SHARE_ENV; the new image maps it at start (share_import()), and its
 * accept() on the inherited listener claims from it as a prefork worker
 * does.
 *
 * Contract: owner functions run in the owner only; share_request() and
 * share_pending_claim() in any descendant.  A slot's state only moves forward
 * (RDMA, MOVING, then TCP or FAILED), and whoever reads it sees the owner's
 * latest word.
 */
#ifndef ROCESHIM_SHARE_H
#define ROCESHIM_SHARE_H

#include <stdbool.h>
#include <stdint.h>

#include <roceshim/stats.h>

enum share_state {
	SHARE_RDMA = 0,	  /* the owner carries it over RDMA */
	SHARE_MOVING = 1, /* the owner moves it to TCP */
	SHARE_TCP = 2,	  /* the kernel socket carries it, for everyone */
	SHARE_FAILED = 3  /* it was reset */
};

enum share_pending {
	SHARE_NOT_PENDING = 0,
	SHARE_PENDING_WAIT = 1,	       /* accepted on the CM, not established */
	SHARE_PENDING_ESTABLISHED = 2, /* waits for accept() */
	SHARE_PENDING_FAILED = 3,      /* the client gave up: it is on TCP */
	SHARE_PENDING_CLAIMED = 4      /* a descendant accepted it */
};

struct share_slot;

/*
 * Owner: opens the socket requests come on, once the progress thread
 * runs; on_request is called there with the ctx of a slot that a
 * descendant asked about.  0 or a negative errno.
 */
int share_start(void (*on_request)(void *ctx));
/*
 * Owner: a slot for a new connection, with ctx for on_request; NULL if
 * none can be had (or share_start() did not succeed).
 */
struct share_slot *share_slot_new(void *ctx);
void share_slot_free(struct share_slot *slot);
/* Owner: publishes the slot's new state and wakes those who wait on it. */
void share_publish(struct share_slot *slot, enum share_state state);

enum share_state share_state(const struct share_slot *slot);

/*
 * Descendant: asks the owner to move the connection to TCP, and waits at
 * most timeout_ms for it (longer than the owner's move may take, so that
 * both ends of the share agree on how it ended).  Returns the state it
 * ended in: SHARE_TCP, or SHARE_FAILED when the owner could not, or could
 * not be reached or died meanwhile, or took too long; or, when a signal
 * handler interrupted the wait, the state before the end (the request
 * stands: a later call waits on).
 */
enum share_state share_request(struct share_slot *slot, int timeout_ms);

/*
 * Owner: the slot's connection is pending for the TCP connection from
 * source to the listener on port; share_pending_settle() records how its
 * handshake ended, share_pending_take() claims it for the owner's own
 * accept() (false: not established, or a descendant took it).
 */
void share_pending_set(struct share_slot *slot,
		       const struct roceshim_stats_endpoint *source,
		       uint16_t port);
void share_pending_settle(struct share_slot *slot, enum share_pending state);
bool share_pending_take(struct share_slot *slot);
enum share_pending share_pending_state(const struct share_slot *slot);

/*
 * Descendant, or a process that joined the region (share_join()): the
 * pending connection of the TCP connection this process accepted from
 * src on port, if any: waits (at most timeout_ms) while its
 * handshake is in flight, and claims it if it was established (then
 * SHARE_PENDING_CLAIMED: the owner drops its side).  SHARE_NOT_PENDING or
 * SHARE_PENDING_FAILED: the client is on plain TCP.  *orphan: the claimed
 * slot's owner is gone, so the slot may be a stale one that a later
 * client from the same source matches (the owner frees its slots as
 * their clients go, a dead owner does not).
 */
enum share_pending
share_pending_claim(const struct roceshim_stats_endpoint *src, uint16_t port,
		    int timeout_ms, bool *orphan);

#define SHARE_ENV "ROCESHIM_SHARE_FD"

/*
 * In a process about to exec or spawn with a listener whose CM listener
 * is another process's (imported: the listener came over an exec,
 * share_imported()): "NAME=value" in a new string, naming a copy of the
 * region's memfd for the new program; NULL if there is none to give.
 * The copy is close-on-exec until share_export_inherit(), called at the
 * last moment (another thread's exec would take it along);
 * share_export_close() closes this thread's copy: after a spawn, or an
 * exec that failed.  All leave errno alone.
 */
char *share_export(bool imported);
void share_export_inherit(void);
void share_export_close(void);
/*
 * Whether this process gave its region to a new program: its pending
 * connections may be accepted elsewhere, as after a fork.
 */
bool share_exported(void);

/*
 * At start: maps the region an exec handed over, if SHARE_ENV names one
 * (checked: a memfd of roceshim's, of this layout), and removes SHARE_ENV
 * from the environment.  share_pending_claim() then looks there too.
 */
void share_import(void);
bool share_imported(void);

/*
 * The holder of a CM listener whose port other processes' listeners
 * share (SO_REUSEPORT, reuseport.h): its region's memfd, which those
 * processes map with share_join(), and in *ino its inode; -ENOENT where
 * there is none (not the owner, or no memfd).  The descriptor stays
 * this module's.
 */
int share_region_fd(uint64_t *ino);
/*
 * A listener (its socket's inode, listener) that shares a port with
 * process pid's CM listener: maps that process's region (its memfd, fd
 * there, of inode ino, opened through /proc and checked as
 * share_import() checks), so that share_pending_claim() looks there too,
 * and lists the listener there as one that claims.  1 where the region
 * is this process's own, which it serves; 0 where it is another's; or a
 * negative errno: no such region, no permission, SHARE_JOINED_MAX
 * regions joined already, or as many listeners listed there as it
 * takes.  Leaves errno alone.
 */
int share_join(int pid, int fd, uint64_t ino, uint64_t listener);
/* Owner: whether listener (an inode) joined this process's region. */
bool share_listener_joined(uint64_t listener);

/*
 * In a fork child: the slots it inherited are its owner's, not its own.
 * fds_shared: the child shares the parent's descriptor table (a clone
 * with CLONE_FILES): the owner's request socket stays open.
 */
void share_fork_child(bool fds_shared);

#endif /* ROCESHIM_SHARE_H */

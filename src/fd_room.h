/* SPDX-License-Identifier: MIT */
/*
 * Room for roceshim's own descriptors.  An upgraded connection holds
 * descriptors beside the program's socket (eventfds, a completion
 * channel, a CM event channel while it connects).  Where they took the
 * lowest free numbers, as new descriptors do, they would shift the
 * numbers the program's next socket(), accept() and open() get, and near
 * RLIMIT_NOFILE they would take the numbers the program needs: it would
 * fail with EMFILE where over TCP it would not.
 *
 * So every such descriptor is moved out of the program's way, to a number
 * at or above the program's soft RLIMIT_NOFILE, which the program itself
 * can never be given.  The kernel checks that limit only when it hands
 * out a number, so the soft limit is raised for the few calls that make
 * the descriptor and its copy, and put back at once (serialised here; a
 * program that changes the limit on another thread at that instant may
 * see its change undone).  Where the hard limit leaves no room above the soft
 * one, the descriptor moves to the highest free number below it, at least
 * FD_ROOM_SPARE short of it (they fill from the top down, so the program's
 * numbers stay its own until the two meet); where there is none above
 * where it was made, it stays there, and connections stay on TCP (reason
 * "fd_limit") once that would come within FD_ROOM_SPARE numbers of the
 * limit.
 *
 * Contract: every function is thread safe and leaves errno alone.
 */
#ifndef ROCESHIM_FD_ROOM_H
#define ROCESHIM_FD_ROOM_H

#include <stdbool.h>
#include <sys/resource.h>

/* Descriptor numbers that must stay free below the limit. */
#define FD_ROOM_SPARE 32

/*
 * Whether a new connection may take descriptors of its own: they can be
 * moved above the limit (and a few numbers below it are free for the
 * moment each exists before it is moved), or there are FD_ROOM_SPARE
 * numbers free below the limit beside all that a connection makes.  Judged by
 * the lowest free number, which is the one the program's next descriptor takes.
 */
bool fd_room(void);

/*
 * Around the making of a descriptor for roceshim's own use: between them
 * the soft limit is raised where it can be, so that the descriptor can
 * be made even when the program holds every number below its limit, and
 * fd_room_hide() moves it.  Calls nest; the thread holds a lock between
 * the outermost two, so only quick calls go between them.
 */
void fd_room_enter(void);
void fd_room_leave(void);
/*
 * Whether this thread is between the two: what it opens and closes there
 * is roceshim's own (or the RDMA libraries', which it calls there).
 */
bool fd_room_inside(void);

/*
 * Moves fd, a descriptor roceshim made for itself (close-on-exec), out
 * of the program's way.  Returns the descriptor to use from now on: a
 * new number, fd being closed; or fd itself where it cannot move and
 * leaves room below the limit.  -EMFILE: it can neither move nor stay;
 * fd is left open for the caller to close.
 */
int fd_room_hide(int fd);

/*
 * As fd_room_hide(), for a descriptor the process makes once and every
 * connection needs (the progress thread's, the CM's): it is never
 * refused, and stays where it was made if it cannot move.
 */
int fd_room_keep(int fd);

/*
 * The program's soft RLIMIT_NOFILE, as it set it: getrlimit() may see it
 * raised while another thread makes a descriptor.
 */
rlim_t fd_room_program_limit(void);

/* A non-blocking close-on-exec eventfd, hidden; -errno if none. */
int fd_room_eventfd(void);

/*
 * A close-on-exec copy of fd for roceshim's own use, out of the
 * program's way where it can be, else at the lowest free number;
 * -errno if none can be made.
 */
int fd_room_dup(int fd);

/* Fork handlers: a fork never happens with the limit raised. */
void fd_room_fork_prepare(void);
void fd_room_fork_parent(void);
void fd_room_fork_child(void);

#endif /* ROCESHIM_FD_ROOM_H */

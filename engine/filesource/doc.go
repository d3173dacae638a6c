// Package filesource is the engine's tailed-file source: it reads a file's
// bytes, splits them into lines on "\n", "\r\n" and "\r", and publishes each
// line (a string, without its terminator) at the byte offset just after its
// terminator, 128 lines at a time with engine.Intake.TryPublishBatch (each
// line taken or refused as engine.Intake.TryPublish would). Only a regular
// file is read: the path is opened with O_NONBLOCK (a FIFO never blocks the
// source in open(2)) and the opened descriptor must be a regular file, at
// the start (else ErrNotRegular) and at every reopen (else a warning, and
// the old file is read on).
//
// # Long lines
//
// A line longer than Options.MaxLine bytes (DefaultMaxLine, 16 MiB; the
// terminator not counted) is never truncated and never published: it is
// skipped whole, reported as a loss (engine.Intake.AddLoss, reason
// LossOversized, with the file's identity, epoch and the line's byte
// range: the feed status counts it, Losses["oversized"], and is not
// lossless, and a
// recording holds a LOST row between the lines around it) and warned with
// its offsets; the position moves past
// it (the pointer passes it with the next line committed; a restart before
// that reports it again). The reader stops buffering a line once it passes
// the limit and discards its bytes as they are read, so the read buffer
// stays within about twice the limit.
//
// # Read strategies
//
//   - Committed (the default): resume at the committed read pointer and tail
//     the file. The pointer file (Options.Pointer, default path+".ptr") is
//     written only by the engine's commit protocol, after every subscribing
//     queue processed the lines it covers: at-least-once delivery.
//   - Earliest: read from offset 0 and tail; no pointer.
//   - Latest: start at the end of the file and tail: only lines appended
//     after the start are published; no pointer.
//   - OnceEarliest: read from 0 to the end of the file, then END_OF_STREAM.
//   - OnceLatest: publish nothing; END_OF_STREAM at once.
//
// # Positions and epochs
//
// A line's position is the exact byte offset after its terminator, counted
// in bytes on disk; the line is decoded as UTF-8 afterwards (invalid bytes
// become U+FFFD, the position stays exact). The epoch names the position
// space: with a pointer, a random epoch is kept in the pointer file and
// replaced, with the offset reset to 0, when the input file is replaced
// (other leading bytes, or another identity with no matching fingerprint),
// truncated (shorter than the pointer) or rewritten in place. Appending to the file or changing
// its times never resets it. Strategies without a pointer use a hash of the
// file's identity (device and inode) as their epoch: a file truncated in
// place and read again from 0 keeps its epoch there (they have no pointer to
// hold a fingerprint, and commit nothing).
//
// # The pointer file
//
// While a Committed source runs, its pointer file is locked (an exclusive
// flock, unix only): a second run on the same pointer, in this process or
// another, fails at once with an error wrapping ErrLocked naming the
// pointer file. A header write (below) locks the new file before renaming
// it into place, so the file at the path is always the locked one; the
// commits the engine's stop makes after Run returned take the lock for
// each write.
//
// The pointer file is exactly 1,024 bytes, memory-mapped (mmap-go), holding
// little-endian int64s: [0] offset, [8] epoch, [16] file identity hash
// (FNV-1a of device and inode), [24] layout version (1), [32] fingerprint
// length, [40] FNV-1a 64 fingerprint of the first min(4096, size) bytes of
// the input. The fingerprint is made from the bytes the source read (at the
// start, the first min(4096, size) bytes; then grown, up to 4,096, with
// what it reads), never from what the file holds at the time of a commit,
// and grown only after checking that the file still starts with the bytes
// already fingerprinted. The offset moves forward only, with one aligned 8-byte store
// into the shared mapping followed by a Flush (msync) per commit. A page of a
// MAP_SHARED mapping is in the kernel's page cache the moment it is stored,
// so it survives a SIGKILL of the process without the msync; the msync is
// for a power loss or an operating-system crash. It costs what the disk
// takes to write a page, once per duty cycle that acknowledged something,
// which bounds how many commits a second a committed feed makes, not how
// many lines. Changes of several header
// fields at once (a new epoch, a reset, a new identity, a grown fingerprint)
// are written to a temporary file, synced and renamed over the pointer file,
// so a crash never leaves a torn header. A pointer file that is empty, too
// short for a header or of an unknown layout is read from 0 with a warning
// (re-delivery, never a skip) and rewritten at 1,024 bytes; a file holding
// only an offset (layout 0) has its offset taken as a byte offset under a new
// epoch.
//
// Bytes 64 to 112 may hold a pending header, laid out as the header (zero
// when none): the header, at offset 0, of a file a run reads from 0 under a
// new epoch after a loss, while the header still describes the file lost
// from (below), or a file ending with an oversized line. It is kept by
// every write of the header until the header moves to that file (or past
// it); a run that finds that file again, at the start or when it moves on
// to it (the same identity, starting with the bytes fingerprinted), reads
// it under the pending header's epoch. A reader of layout 1 that ignores it
// draws a new epoch instead.
//
// # Each group's progress
//
// The feed commits at its slowest group: the header's offset is what every
// group completed, and what a restart reads from. Bytes 128 to 968 keep,
// beside it, each group's own progress (the source's committer is an
// engine.GroupCommitter): [128] the region's layout version
// (GroupsLayout, 1; 0 in a file written before it: no progress kept),
// then GroupSlots (13) slots of 64 bytes from byte 136, each [0] check
// (FNV-1a 64 of the slot's bytes 8 to 64), [8] epoch, [16] offset (the
// offset after the last line of the group's contiguous completed prefix),
// [24] name length (1 to GroupNameMax, 32), [32] the group's name,
// zero-padded. A slot counts only when its check holds, its epoch is the
// header's and its offset past the header's: at a start the source tells
// the feed (engine.Intake.SkipCompleted), which, when it honours it
// (engine.FeedConfig.SkipCompleted), does not hand that group the lines
// it completed (counted: SubscriberStatus.AlreadyCompleted),
// while the slower groups get every line after the header's offset. A
// group's slot is written at a commit, with one aligned 8-byte store per
// word, its check last, and flushed with the header's offset (one Flush,
// or one for the slots alone when the offset did not move): a kill
// between two stores leaves a slot that fails its check, read as no
// progress (the group gets the lines again), never as progress the group
// did not make, and a slot and the offset each hold what was completed,
// whichever is stored first; a header write (rename) carries the slots of
// its epoch past its offset. A group's progress is kept only in the header's epoch:
// progress in a file read after the pointer's (a rotation not yet
// committed) is not kept. A group with a longer name, or past the 13th,
// keeps none (warned once): it gets again what the slowest group had not
// completed, as every group did before the region. A reader of layout 1
// that ignores the region reads every group from the header's offset.
//
// # Moving back (a backwards seek)
//
// A Committed source's committer is an engine.Rewinder and an
// engine.RewindChecker: Engine.Seek to a line before a group's position
// (a backwards seek, docs/GUARANTEES.md "Seek") has the source read the
// file again from the line after the target, for that group. A line's
// position is the offset after it, so the target's is the offset through
// which the group is done. Rewind, on the polling goroutine, makes the
// move back durable in one header write (a temporary file, synced and
// renamed: a kill leaves the file before it or after it, never a mix):
// the header's offset comes down to the target's (or stays, when lower: a
// slower group's), each other group of the feed, and each group whose slot
// counted, keeps a slot at least at the progress it had (its slot, what
// the engine told of it, or the old offset), and the sought group's slot
// is at the target (none when the target is the new offset). Then the
// reader reads again from the target, in the same file, and Rewind
// returns the position of the last line published. A restart after it
// hands the group every line after the target, the others nothing they
// completed (with engine.FeedConfig.SkipCompleted). An oversized line read
// again is reported lost once.
//
// Only the file the pointer describes is read again, in its epoch.
// CheckRewind (on the operator's goroutine, under Source's mutex) refuses
// with an error wrapping ErrRewind, before anything changes: a target of
// another epoch than the one the source reads and the pointer describes
// (a rotation, a copy-and-truncate or a rewrite since), one while the
// source does not read the pointer's file (a file moved to and held until
// the lines before it are committed, a loss counted at the start before
// the first commit, not started), a position with a key, a target past
// the last line published (a move back lowers that to its target: a line
// an earlier move back has not read again yet is ahead), a pointer file
// without the group progress region, a group (sought, other, or one whose
// progress the pointer file keeps) whose name is longer than GroupNameMax,
// more such groups than GroupSlots. Once it accepted a move back, the
// source leaves not the file it reads (no rotation, no rewrite handled:
// they wait) until its next poll, which applies it; a dry run holds it
// the same way, for one duty cycle. A file truncated or rewritten under
// the reader in place with its first bytes kept is read again as it is
// now, as any read (see Tailing).
//
// # What the pointer holds from a start to the first commit
//
// Record before effect: a run that counts a loss moves the pointer past it
// only once the recording holds it. A Committed start:
//
//   - with no pointer (no file, an empty one, one it cannot use) or a
//     pointer of layout 0, writes the header of the file at the path (at 0,
//     or at the layout-0 offset, at 0 when the file is shorter) under a
//     new epoch at once: it held no file or epoch a restart could find a
//     loss in;
//   - resuming in the pointer's file, at the path (the same identity, or
//     the same first bytes under another identity), renamed to a rotated
//     name (found by identity and fingerprint) or copied there
//     (copytruncate: found by fingerprint), writes its header (the identity,
//     the fingerprint of its first bytes now) at once, at the pointer's
//     offset and epoch: nothing is passed over;
//   - when the pointer's file was replaced, truncated or rewritten and no
//     copy of it is found, counts the rest of it lost (LossUnread)
//     and reads the file at the path from 0 under a new epoch, but the
//     header keeps the old file, offset and epoch until the run's first
//     commit. The engine commits only positions of items processed (their
//     rows recorded), and every item read after the loss comes after it in
//     every stream (its LOST row first): a run killed, or whose recording
//     cannot be written, before its first commit leaves the pointer as it
//     found it, and the next run finds the same loss, counts it and records
//     it. Only the pending header (the new file's identity, fingerprint and
//     epoch) is written at once, so that the next run reads the lines again
//     under the same epoch while the file holds them: a state that skips by
//     epoch and offset (core.Delivery.AlreadyApplied) does not apply them
//     twice.
//
// A file truncated or rewritten under a following source with no copy of
// it is handled alike: the pointer moves to the file read again only with
// the commit of a line read after the loss (never at once because every
// line before it was committed), and the pending header holds the new epoch
// meanwhile.
//
// # Tailing, rotation and replacement
//
// After every read, and at every end of file, a source compares the open
// file's first bytes (up to 4,096) with the bytes it read there. If they
// changed, or the file is shorter than what was read (the file was
// truncated, or rewritten in place with or without a truncation, even
// longer than before), the bytes read and not yet published are discarded
// (they may be a fragment of the new content at the old content's offsets)
// and the file is read again from 0 under a new epoch, with a warning; a
// run of NUL bytes at its start is then a hole a writer that kept its old
// offset left (copytruncate), skipped, warned and counted (the source's
// Status: HoleBytes), not data. Every file read again from 0 is counted
// (Status.Replaced). A rewrite that
// keeps the bytes compared is taken for an append: nothing else tells them
// apart (never a file time).
//
// The bytes after the last line published from such a file, to its old
// end, are then only in a copy, if any (copytruncate: the file copied to a
// rotated name, then truncated). Before it reads the file again, a tailing
// source looks among the rotated siblings (Options.Rotated) for a file it
// did not know whose first bytes are those it read and last found in the
// file, holding at least the bytes up to the last line it published: the
// copy, read from there to its end under the old epoch (the pointer
// describes the copy meanwhile), then the files rotated after it, then the
// truncated file. With no copy (and in a once-read, which never moves on
// to another file) those bytes are gone, and whether there were any cannot
// be known: they are reported as a loss (LossUnread, with the
// file's identity, epoch and the offset it was read to: Losses["unread"], not
// lossless, a LOST row), warned and kept in the feed's detail. A file the
// source read no byte of (empty whenever it looked) that is written, copied
// and truncated between two looks shows no change at all: its copy is not
// looked for, and nothing is counted. A restart whose pointer names the
// file at the path with an empty fingerprint (no byte of it read) finds a
// copy made while it was stopped by when the copy was made (after the
// pointer file was last written: its birth time, else its modification
// time), the file at the path not going on from its bytes; a sibling made
// at the very time the pointer was written cannot be told from a file an
// earlier run read: not read, and the pointer's file counted unread.
//
// At the end of the open file a tailing source also checks that the path
// still names the file it reads (same device and inode). If not, it reports
// BEHIND with the reason, reads the old file to its end, then every file
// rotated after it (several rotations since its last look, each file now at
// a rotated name), each from 0 under a new epoch, in rotation order, and
// then reopens the path through the same identity check as a restart. A
// path with no file (a rotation in progress) is not a change.
//
// Which rotated files come after the one just read is decided by identity
// and fingerprint: the source knows the files at the rotated names that it
// read, or that were there before the file it read, by their identity and
// the fingerprint of their first bytes (an inode reused by a new file is
// not taken for the old one); a file renamed again keeps its identity. The
// order among the files it does not know comes from their names, in
// natural order (runs of digits compared as numbers: PATH-9 before PATH-10;
// dated names in date order), never from file times; newest first instead
// when they all lie before the file just read (a scheme that renumbers its
// rotated files at each rotation, PATH.1 being the newest). A file rotated
// after the one read before it that is gone or cannot be opened when its
// turn comes is counted as never read (Losses["unread"], not lossless) and
// warned with its name and identity. The pointer keeps the old file's
// identity and epoch until every line published from it is committed, and
// only then moves to the new file, so a crash before re-reads the old
// file's unprocessed lines; an acknowledgement of the old epoch is never
// committed into the new pointer. A Committed source publishes no line of
// the new file (opened: kept open, read once the wait is over) until then:
// it waits, BEHIND, until the pointer describes the new file (its
// identity, the epoch drawn for it, offset 0). So only the pointer's file
// ever has lines processed and not committed, and a restart reads again
// only lines of the pointer's file, under its epoch: a state that skips by
// epoch and offset (core.Delivery.AlreadyApplied) never applies a line
// twice (TestARestartAfterARotationNeverAppliesALineTwiceToAState). The
// cost: at each rotation (and copy-and-truncate) the new file's lines wait
// for the slowest group to process the old file's. A file read again from
// 0 after a loss (truncated or rewritten with no copy) is not held: its
// epoch is kept as the pending header meanwhile. The pointer moves on from
// a file at the end of the last line published from it: bytes after it
// that no line covers (an oversized line skipped, a hole) are never
// acknowledged. When the file ended with an oversized line counted lost,
// the new file is held only until the lines published before are
// committed; the pointer then stays at that file's last published line,
// the new file's epoch kept as the pending header, and moves to the new
// file with the commit of a line of its own (so never before the loss's
// LOST row is recorded): a restart counts the loss again and reads the new
// file under the pending epoch, and applies no line twice
// (TestARotationAfterAnOversizedLastLineMovesOnAndAppliesEachLineOnce).
// A partial last line is re-read from its start after a reopen, never
// duplicated.
//
// At the start, when the path names another file than the pointer's (or
// the pointer's file was truncated or rewritten), the pointer's file is
// looked for among the rotated siblings (Options.Rotated: glob patterns,
// "{path}" standing for the input path; DefaultRotated is "{path}.1" and
// "{path}-*"): by identity and fingerprint (renamed), else by fingerprint
// alone (a copy). Found, it is read from the pointer to its end under the
// pointer's epoch, then every file rotated after it, in rotation order
// (above), then the path. At a restart the files rotated after the
// pointer's are those after it in the natural order of the names (the
// source cannot know which it read in an earlier run): right for schemes
// that give each rotated file a name of its own (dated or sequence
// numbered names, and the default patterns); a scheme that renumbers its
// rotated files is found across a restart only through one rotation
// ({path}.1): a pattern matching more of its names would have a restart
// after several rotations take its newer files for older ones. Not found,
// the run warns which file was
// read to which offset and that its bytes from there were never read, keeps
// that in the feed's detail, and reports it as a loss (LossUnread,
// with that file's identity, epoch and offset: Losses["unread"] in the status,
// not lossless, a LOST row before the first line read after it); the
// pointer keeps describing that file until the run's first commit (above).
//
// # Backpressure
//
// The default overload policy is engine.Pause: when TryPublish refuses a
// line, the source keeps it and the unread rest of its buffer, reads nothing
// further, stays BEHIND, and offers the same line again on its next duty
// cycle. CAUGHT_UP is reported only once everything to the end of the file
// was taken.
//
// # Ending
//
// A tailing source runs until the engine stops it (ctx done). A once-read
// returns from Run as soon as its last line was taken and END_OF_STREAM
// reported: once-reads have no pointer and register no committer, so there
// is nothing to wait for; the engine settles the feed when the queues are
// drained. After Run returned the engine's stop commits once or twice more
// on its own goroutine: the committer then maps the pointer file for each
// write, so a clean engine Stop commits exactly what the slowest group
// processed.
//
// # Duty cycle and commit lag
//
// Each duty cycle polls acknowledgements (engine.Intake.PollAcks, which
// commits), then reads at most one buffer (256 KiB) and publishes its lines,
// and polls again if it published. An idle or paused source yields a few
// times, then sleeps Options.Interval (1ms by default). The pointer thus
// lags processing by at most about one duty cycle: after a crash those lines
// are delivered again (use core.Delivery.AlreadyApplied with a position
// stored with the application's state to skip them).
package filesource

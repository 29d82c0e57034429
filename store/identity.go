package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The database file's identity.
//
// SQLite goes on reading and writing the file it opened after that file
// was deleted or replaced: a commit then "succeeds" into an unlinked file
// that vanishes with the process, and the next start finds an empty or
// different store. So the store notes the device and inode of the
// database file and of its WAL once it has opened them, and compares
// them with what the path names now before every commit and at least
// every FileCheckInterval (CheckFile, off the write path). Once they
// differ (or the file no longer starts with SQLite's header: truncated
// or overwritten in place), the store is lost for this process:
//
//   - every write is refused with ErrUnavailable (*RefusedError, kind
//     "lost"), naming the file and what to do;
//   - every read fails the same way, so the reconciler keeps the desired
//     state it holds and withdraws nothing ("unknown is never empty");
//     the rules already announced stay announced;
//   - no new connection opens the path any more (the connector checks
//     the file each new connection opened, and never creates it).
//
// The connections already open still reach the old file: when it was
// deleted or replaced, the store copies it and its WAL out through /proc
// to PATH.rescued and PATH.rescued-wal, which the operator can move back
// in place (the error and the log say how).

// FileCheckInterval is how often CheckFile runs off the write path.
const FileCheckInterval = time.Second

// sqliteHeader is the first 16 bytes of every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

type fileID struct{ dev, ino uint64 }

func (f fileID) String() string { return fmt.Sprintf("device %d inode %d", f.dev, f.ino) }

// fileIdent is what an engine opened: the database file and its WAL.
type fileIdent struct {
	db, wal fileID
	hasWAL  bool
}

// RefusedError is why the store refuses every write: Kind "lost" (the
// database file was deleted or replaced while running), "corrupt" (it
// failed its integrity check) or "held" (a start on a store that is not
// the one this appliance ran with, until the operator confirms it). It
// matches ErrUnavailable: the API answers 503. Msg names the file and
// says what to do.
type RefusedError struct {
	Kind string
	Msg  string
}

func (e *RefusedError) Error() string { return "store: " + e.Msg }

// Is makes a RefusedError match ErrUnavailable.
func (e *RefusedError) Is(target error) bool { return target == ErrUnavailable }

// Refusal returns why the store refuses writes; nil while it takes them.
func (s *Store) Refusal() *RefusedError { return s.refusal.Load() }

// refuse makes every later write fail with e. A lost file replaces any
// other reason (nothing else can be done with the store); otherwise the
// first reason stays.
func (s *Store) refuse(e *RefusedError) *RefusedError {
	for {
		cur := s.refusal.Load()
		if cur != nil && (cur.Kind == "lost" || e.Kind != "lost") {
			return cur
		}
		if s.refusal.CompareAndSwap(cur, e) {
			s.signal() // the reconciler reads again, and finds out
			return e
		}
	}
}

// refused returns the refusal as an error, nil if there is none.
func (s *Store) refused() error {
	if r := s.refusal.Load(); r != nil {
		return r
	}
	return nil
}

// noteIdentity records the identity of the database file and its WAL as
// opened; from then on the engine compares them (verify).
func (e *sqliteEngine) noteIdentity() {
	db, ok, err := fileIdentity(e.path)
	if err != nil || !ok {
		return // not on this platform, or not a plain file: not checked
	}
	id := &fileIdent{db: db}
	id.wal, id.hasWAL, _ = fileIdentity(e.path + "-wal")
	e.ident.Store(id)
}

// verify returns what happened to the file opened, "" if the path still
// names it (or cannot tell). With header it also reads the first bytes.
func (e *sqliteEngine) verify(header bool) string {
	id := e.ident.Load()
	if id == nil {
		return ""
	}
	cur, ok, err := fileIdentity(e.path)
	switch {
	case err != nil:
		return "" // unreadable now (a permission change...): not proof of a loss
	case !ok:
		return "was deleted"
	case cur != id.db:
		return fmt.Sprintf("was replaced by another file (%s, the file opened was %s)", cur, id.db)
	}
	if id.hasWAL {
		wal, ok, err := fileIdentity(e.path + "-wal")
		switch {
		case err != nil:
		case !ok:
			return "lost its write-ahead log " + filepath.Base(e.path) + "-wal (deleted)"
		case wal != id.wal:
			return "had its write-ahead log " + filepath.Base(e.path) + "-wal replaced"
		}
	}
	if header {
		f, err := os.Open(e.path)
		if err != nil {
			return ""
		}
		defer f.Close()
		buf := make([]byte, len(sqliteHeader))
		n, _ := f.ReadAt(buf, 0)
		if !bytes.Equal(buf[:n], sqliteHeader) {
			return "was truncated or overwritten (it no longer starts with SQLite's header)"
		}
	}
	return ""
}

// checkFile is the check before every commit: a stat of the file and of
// its WAL. It returns the store's refusal, if any.
func (s *Store) checkFile() error {
	if lite, ok := s.eng.(*sqliteEngine); ok && s.refusal.Load() == nil {
		if what := lite.verify(false); what != "" {
			s.lose(lite, what)
		}
	}
	return s.refused()
}

// CheckFile compares the database file and its WAL with the ones this
// process opened and reads the file's header: a file deleted, replaced,
// truncated or overwritten makes the store lost (see above). It returns
// the store's refusal, if any. It runs every FileCheckInterval; tests
// call it to check at once.
func (s *Store) CheckFile() error {
	if lite, ok := s.eng.(*sqliteEngine); ok && s.refusal.Load() == nil {
		if what := lite.verify(true); what != "" {
			s.lose(lite, what)
		}
	}
	return s.refused()
}

// lose marks the store lost: writes and reads fail from now on. If the
// old file is still open in this process (deleted, or replaced by
// another), a copy of it and of its WAL is written next to the path
// (rescue).
func (s *Store) lose(lite *sqliteEngine, what string) {
	abs, err := filepath.Abs(lite.path)
	if err != nil {
		abs = lite.path
	}
	fds := openFiles(abs, abs+"-wal")
	db := fds[abs]
	held := db
	next := fmt.Sprintf("Restore %s from a backup.", s.path)
	if held.deleted {
		next = fmt.Sprintf("This process still has the old file open and copies it to %s.rescued (with %s.rescued-wal); once the log says it is done, stop ribkeeper, move the copies to %s and %s-wal, and start it again, or restore %s from a backup.",
			s.path, s.path, s.path, s.path, s.path)
	}
	msg := fmt.Sprintf("the database file %s %s while ribkeeper was running: writes are refused and nothing is withdrawn (the rules announced stay announced). %s "+
		"A start on a store that is not the one this appliance ran with keeps the BGP sessions down (routers with graceful restart keep their rules) until you confirm it with 'ribkeeper serve --accept-new-store'",
		s.path, what, next)
	r := s.refuse(&RefusedError{Kind: "lost", Msg: msg})
	if r.Kind != "lost" || r.Msg != msg {
		return // lost already
	}
	lite.lost.Store(r)
	s.log.Error("database file lost: refusing every write and read; the reconciler keeps the rules it holds", "path", s.path, "what", what, "next", r.Msg)
	if !held.deleted {
		close(s.rescued)
		return
	}
	// Close waits for the copy (rescuing, then rescued).
	s.rescuing.Store(true)
	go func() {
		defer close(s.rescued)
		wal, ok := fds[abs+"-wal"]
		err := copyFD(db.fd, s.path+".rescued")
		if err == nil && ok {
			err = copyFD(wal.fd, s.path+".rescued-wal")
		}
		if err != nil {
			pid := os.Getpid()
			cmd := fmt.Sprintf("cp /proc/%d/fd/%d %s.rescued", pid, db.fd, s.path)
			if ok {
				cmd += fmt.Sprintf(" && cp /proc/%d/fd/%d %s.rescued-wal", pid, wal.fd, s.path)
			}
			s.log.Error("cannot copy the lost database out: copy it by hand while this process runs, then stop ribkeeper and move the copies in place", "error", err, "command", cmd)
			return
		}
		s.log.Warn("copied the lost database out: stop ribkeeper, move the copies in place and start it again to get every rule back",
			"copy", s.path+".rescued", "command", fmt.Sprintf("mv %s.rescued %s && mv %s.rescued-wal %s-wal", s.path, s.path, s.path, s.path))
	}()
}

// openFile is one of this process's descriptors of a file.
type openFile struct {
	fd      int
	deleted bool // the path no longer names it
}

// openFiles maps each of paths that this process has open (Linux:
// /proc/self/fd), deleted or not, to one of its descriptors, a deleted
// one first.
func openFiles(paths ...string) map[string]openFile {
	out := map[string]openFile{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, ent := range ents {
		target, err := os.Readlink("/proc/self/fd/" + ent.Name())
		if err != nil {
			continue
		}
		name, deleted := strings.CutSuffix(target, " (deleted)")
		fd, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		for _, p := range paths {
			if cur, seen := out[p]; name == p && (!seen || deleted && !cur.deleted) {
				out[p] = openFile{fd: fd, deleted: deleted}
			}
		}
	}
	return out
}

// copyFD copies what descriptor fd of this process reads to the file to
// (through a temporary file, synced and renamed).
func copyFD(fd int, to string) error {
	src, err := os.Open("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := to + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// watchFile runs CheckFile every FileCheckInterval until ctx ends.
func (s *Store) watchFile(ctx context.Context) {
	t := s.clock.NewTimer()
	defer t.Stop()
	for {
		t.Reset(FileCheckInterval)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		s.CheckFile()
	}
}

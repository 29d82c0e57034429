package store

import "golang.org/x/sys/unix"

// diskSpace returns the bytes an unprivileged writer may still use on the
// file system holding dir, and whether it is mounted read-only.
func diskSpace(dir string) (free uint64, readOnly bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return st.Bavail * uint64(st.Bsize), st.Flags&unix.ST_RDONLY != 0, nil
}

package store

import "golang.org/x/sys/unix"

// fileIdentity returns the device and inode of the file at path; exists
// is false when there is none.
func fileIdentity(path string) (id fileID, exists bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if err == unix.ENOENT {
			return fileID{}, false, nil
		}
		return fileID{}, false, err
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true, nil
}

//go:build !linux

package store

import "errors"

// diskSpace is only implemented on Linux; elsewhere the free space is
// unknown, and unknown is not room: no write is announced ahead of its
// commit.
func diskSpace(dir string) (free uint64, readOnly bool, err error) {
	return 0, false, errors.New("free space is only read on Linux")
}

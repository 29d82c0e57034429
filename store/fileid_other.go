//go:build !linux

package store

import "errors"

// fileIdentity is only implemented on Linux; elsewhere a database file
// deleted or replaced while running is not detected.
func fileIdentity(path string) (id fileID, exists bool, err error) {
	return fileID{}, false, errors.New("file identity is only read on Linux")
}

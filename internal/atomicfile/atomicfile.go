// Package atomicfile replaces a file's content so that, whenever the machine stops, the file holds
// either the old content or the new: what the emulators' data directories (the Tasks emulator's
// snapshot and log headers, the payment sandbox's state) are written with.
package atomicfile

import (
	"os"
	"path/filepath"
)

// TempSuffix ends the name of the temporary file Write writes path's new content to (path +
// TempSuffix). One left behind by a crash holds nothing anyone reads; remove it at start-up.
const TempSuffix = ".tmp"

// Write makes path hold data: a temporary file in the same directory, written and synced, renamed
// over path, then the directory synced, without which the rename itself may not survive a power
// loss. One writer per path at a time.
func Write(path string, data []byte) error {
	tmp := path + TempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes a directory's entries (files created, renamed or removed in it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

package tasksemu

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The data dir's two files share one layout (README.md, "Data dir format"): a file header,
// then frames. A frame is one checksummed, length-prefixed record holding a batch of mutations
// (mutation.go): in the log, everything one group commit made durable with a single write and
// fsync; in a snapshot, a slice of the state.
//
// Frames rather than single mutations carry the checksum because a frame is what one write
// puts on disk: a crash mid-append can only damage the last frame (the one whose fsync had not
// returned, so no client was told about its changes), while every earlier frame was fsynced
// before a later one was written. That is what lets recovery tell a torn tail (the damage runs
// to the end of the file: drop it) from corruption (a valid frame follows the damage: refuse
// to start rather than lose acknowledged changes silently).

const (
	logFile      = "tasks.log"      // mutations since the snapshot
	snapshotFile = "tasks.snapshot" // the state at the start of the log
	legacyFile   = "tasks.json"     // the format before the log: one JSON snapshot (legacy.go)
)

const (
	logMagic        = "TASKSLOG"
	snapshotMagic   = "TASKSNAP"
	fileVersion     = 1
	fileHeaderSize  = 24 // magic (8), version (u32), generation (u64), CRC-32C of the 20 bytes before (u32)
	frameHeaderSize = 12 // payload length (u32), CRC-32C of the payload (u32), CRC-32C of the 8 bytes before (u32)
)

// maxFrameSize bounds a frame's declared length, so that a damaged length is recognized
// without reading that far (a frame holds at most a batch of mutations; one task is <= 1 MB).
const maxFrameSize = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// corruptError is damage recovery refuses to repair: it names the file and the byte offset.
type corruptError struct {
	path   string
	offset int64
	reason string
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("%s: corrupt at offset %d: %s", e.path, e.offset, e.reason)
}

// appendFileHeader appends the header of a log or snapshot of generation gen.
func appendFileHeader(b []byte, magic string, gen uint64) []byte {
	start := len(b)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, fileVersion)
	b = binary.LittleEndian.AppendUint64(b, gen)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// parseFileHeader checks data's header and returns its generation. A header is written
// whole before the file gets its name (temporary file, fsync, rename), so any damage to it is
// corruption, never a torn write.
func parseFileHeader(path string, data []byte, magic string) (uint64, error) {
	if len(data) < fileHeaderSize {
		return 0, &corruptError{path, 0, fmt.Sprintf("the file is %d bytes, shorter than its %d-byte header", len(data), fileHeaderSize)}
	}
	h := data[:fileHeaderSize]
	if string(h[:8]) != magic {
		return 0, &corruptError{path, 0, fmt.Sprintf("not a %s file (magic %q)", magic, h[:8])}
	}
	if crc32.Checksum(h[:20], castagnoli) != binary.LittleEndian.Uint32(h[20:]) {
		return 0, &corruptError{path, 0, "header checksum mismatch"}
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != fileVersion {
		return 0, &corruptError{path, 8, fmt.Sprintf("format version %d, this emulator reads version %d", v, fileVersion)}
	}
	return binary.LittleEndian.Uint64(h[12:]), nil
}

// sealFrame fills in the frameHeaderSize bytes reserved at the start of frame for the
// payload that follows them.
func sealFrame(frame []byte) {
	payload := frame[frameHeaderSize:]
	binary.LittleEndian.PutUint32(frame[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
	binary.LittleEndian.PutUint32(frame[8:], crc32.Checksum(frame[:8], castagnoli))
}

// frameAt returns the payload of the frame starting at data[off:], or ok=false when there is
// no whole, intact frame there.
func frameAt(data []byte, off int) (payload []byte, ok bool) {
	if len(data)-off < frameHeaderSize {
		return nil, false
	}
	h := data[off : off+frameHeaderSize]
	if crc32.Checksum(h[:8], castagnoli) != binary.LittleEndian.Uint32(h[8:]) {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(h[0:]))
	if n == 0 || n > maxFrameSize || n > len(data)-off-frameHeaderSize {
		return nil, false
	}
	payload = data[off+frameHeaderSize : off+frameHeaderSize+n]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, false
	}
	return payload, true
}

// frame is one intact frame read back, with its offset in the file (for error messages).
type frame struct {
	offset  int64
	payload []byte
}

// readFrames returns the frames of data after its header. With torn allowed (the log), damage
// that runs to the end of the file is a torn tail: the frames before it are returned with
// end = where the damage starts. Otherwise, and whenever an intact frame follows the damage,
// it returns a corruptError naming the offset of the damage.
func readFrames(path string, data []byte, torn bool) (frames []frame, end int64, err error) {
	off := fileHeaderSize
	for off < len(data) {
		payload, ok := frameAt(data, off)
		if !ok {
			if !torn {
				return nil, 0, &corruptError{path, int64(off), "damaged record in a snapshot (written whole, then renamed)"}
			}
			for next := off + 1; next < len(data); next++ {
				if _, ok := frameAt(data, next); ok {
					return nil, 0, &corruptError{path, int64(off), fmt.Sprintf(
						"damaged record followed by an intact one at offset %d: the log lost changes in the middle; "+
							"move the data dir aside to start empty", next)}
				}
			}
			return frames, int64(off), nil
		}
		frames = append(frames, frame{int64(off), payload})
		off += frameHeaderSize + len(payload)
	}
	return frames, int64(off), nil
}

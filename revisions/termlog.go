package revisions

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"
)

// Termination-log record types.
const (
	// RecordStart is appended by the operand when it starts, before anything
	// else can fail.
	RecordStart = "start"
	// RecordExit is appended when the operand exits with an error.
	RecordExit = "exit"
)

// TerminationRecord is one JSON line of the termination log. The operand
// (revgate proxy) appends them; the startup monitor reads them.
type TerminationRecord struct {
	// Type is "start" or "exit".
	Type string `json:"type"`
	// Time the record was written.
	Time time.Time `json:"time"`
	// Revision of the operand that wrote the record (0 when it runs outside a revision).
	Revision int `json:"revision"`
	// PID of the operand process.
	PID int `json:"pid"`
	// Error is the reason of a failure exit.
	Error string `json:"error,omitempty"`
	// ExitCode of an exit record.
	ExitCode int `json:"exitCode,omitempty"`
}

// AppendTerminationRecord appends rec as one JSON line to the termination log
// at path, creating the file and its folder when missing; a zero rec.Time
// is stamped with clk's time, in UTC. The line is written with a single
// write on an O_APPEND descriptor and synced, so concurrent writers never
// interleave and a record survives a crash right after.
func AppendTerminationRecord(path string, clk clock.PassiveClock, rec TerminationRecord) error {
	if rec.Time.IsZero() {
		rec.Time = clk.Now().UTC()
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode termination record: %w", err)
	}
	line = append(line, '\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create termination log folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open termination log: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("append termination record to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync termination log %s: %w", path, err)
	}
	return f.Close()
}

// ReadTerminationRecords reads every well-formed record of the termination
// log at path, in file order. Lines that do not parse (a torn last line, text
// written by something else) are skipped. A missing file yields no records
// and no error.
func ReadTerminationRecords(path string) ([]TerminationRecord, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read termination log: %w", err)
	}
	var out []TerminationRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var rec TerminationRecord
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Type == "" {
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// maxLine bounds one forwarded log line; longer lines are split.
const maxLine = 64 << 10

// processSpec is what a host process is started from.
type processSpec struct {
	path string
	args []string
	env  []string
	dir  string
}

// process is one started host process, leader of its own process group.
type process struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	done    chan struct{} // closed once the process has exited and been reaped
	logsWG  sync.WaitGroup

	mu       sync.Mutex
	exitCode int
	exitErr  error
}

// startProcess starts spec as the leader of a new process group, with its
// stdout and stderr forwarded line by line to log.
//
// The child gets Pdeathsig SIGTERM so it does not outlive a SIGKILLed
// supervisor. Linux sends that signal when the *thread* that forked the child
// exits, so the fork happens on a locked OS thread that is unlocked again
// afterwards: Go never ends a thread that is not locked, hence the thread
// lives as long as the supervisor. Pdeathsig reaches the group leader only;
// grandchildren must follow their parent.
func startProcess(spec processSpec, log *slog.Logger, now time.Time) (*process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:   spec.path,
		Args:   spec.args,
		Env:    spec.env,
		Dir:    spec.dir,
		Stdout: outW, // *os.File: handed to the child as is, no copy goroutine that Wait would wait for
		Stderr: errW,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGTERM,
		},
	}
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", spec.path, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, started: now, done: make(chan struct{})}
	p.logsWG.Add(2)
	go p.forward(outR, log, "stdout")
	go p.forward(errR, log, "stderr")
	go p.wait()
	return p, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode() // -1 when killed by a signal
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else {
			code = -1
		}
	}
	// The leader is gone; whatever it left in its group would keep ports and
	// files of a pod that no longer runs.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	p.mu.Lock()
	p.exitCode, p.exitErr = code, err
	p.mu.Unlock()
	close(p.done)
}

// exit returns the exit code once done is closed; a signal death is 128+signo.
func (p *process) exit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode
}

func (p *process) forward(r *os.File, log *slog.Logger, stream string) {
	defer p.logsWG.Done()
	defer r.Close()
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			}
			log.Info(string(line), "stream", stream)
		}
		if err == nil || errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
			log.Warn("reading process output failed", "stream", stream, "err", err)
		}
		return
	}
}

// signal sends sig to the whole process group.
func (p *process) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signal process group %d: %w", p.pid, err)
	}
	return nil
}

// terminate sends SIGTERM to the process group and SIGKILL once grace has
// passed on clock c; it returns once the leader has exited.
func (p *process) terminate(c clock.Clock, grace time.Duration, log *slog.Logger) {
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		log.Warn("sending SIGTERM failed", "pid", p.pid, "err", err)
	}
	t := c.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C():
	}
	log.Warn("grace period over, killing process group", "pid", p.pid, "grace", grace)
	if err := p.signal(syscall.SIGKILL); err != nil {
		log.Warn("sending SIGKILL failed", "pid", p.pid, "err", err)
	}
	<-p.done
}

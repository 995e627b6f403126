package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// qmp is a minimal client of qemu's machine protocol: one command at a time, events
// skipped. It is how the host resets or powers down a VM without touching the guest.
type qmp struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	var conn net.Conn
	var err error
	// qemu creates the socket shortly after it starts.
	for {
		conn, err = d.DialContext(ctx, "unix", path)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("qmp connect: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	q := &qmp{conn: conn, r: bufio.NewReader(conn)}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// Greeting, then capabilities negotiation.
	if _, err := q.read(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := q.execute("qmp_capabilities"); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

type qmpReply struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

func (q *qmp) read() (qmpReply, error) {
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return qmpReply{}, err
	}
	var r qmpReply
	if err := strictjson.DecodeOpen(line, &r); err != nil {
		return qmpReply{}, fmt.Errorf("qmp reply %q: %w", line, err)
	}
	return r, nil
}

// execute runs cmd with args (nil for none) and returns its "return" value.
func (q *qmp) execute(cmd string, args ...map[string]any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if len(args) > 0 {
		req["arguments"] = args[0]
	}
	b, _ := json.Marshal(req)
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		r, err := q.read()
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		switch {
		case r.Event != "":
			continue
		case r.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", cmd, r.Error.Class, r.Error.Desc)
		case r.Return != nil:
			return r.Return, nil
		}
	}
}

func (q *qmp) close() { q.conn.Close() }

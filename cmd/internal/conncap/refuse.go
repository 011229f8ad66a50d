package conncap

import (
	"io"
	"net"
	"time"
)

const (
	// MaxRefusing is the most refusals in progress at once; a connection
	// refused beyond that is closed unanswered.
	MaxRefusing = 64
	// RefuseTime bounds how long a refusal reads the request it answers.
	RefuseTime = 2 * time.Second
	// RefuseBytes bounds how much of it a refusal reads: the largest
	// header allowed by default and a little more.
	RefuseBytes = 80 << 10
)

// refusal is the answer to a request refused at the cap.
const refusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: 34\r\n" +
	"\r\n" +
	"too many connections, retry later\n"

// refuse turns away nc, which found no slot.
func (l *Listener) refuse(nc net.Conn) {
	l.rejected.Add(1)
	if l.calls {
		nc.Close()
		return
	}
	if l.refusing.Add(1) > MaxRefusing {
		l.refusing.Add(-1)
		nc.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		refuse503(nc)
	}()
}

// refuse503 answers the request that arrives on nc, if its header does
// within RefuseTime and RefuseBytes, with 503, and closes nc. What the
// client sent after the header is read, within the same bounds, before
// closing: closing with it unread would reset the connection and could
// lose the answer.
func refuse503(nc net.Conn) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(RefuseTime))
	r := io.LimitReader(nc, RefuseBytes)
	buf := make([]byte, 4096)
	var end headerEnd
	for !end.done {
		n, err := r.Read(buf)
		end.scan(buf[:n])
		if err != nil {
			if !end.done {
				return // no whole header in time: nothing to answer
			}
			break
		}
	}
	if _, err := io.WriteString(nc, refusal); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	for {
		if _, err := r.Read(buf); err != nil {
			return
		}
	}
}

// headerEnd finds the blank line that ends an HTTP/1 header in bytes
// scanned piece by piece.
type headerEnd struct {
	// state is 1 after a line's end, 2 after a line's end and a CR, 0
	// otherwise.
	state int
	done  bool
}

func (h *headerEnd) scan(p []byte) {
	for _, b := range p {
		switch {
		case h.done:
			return
		case b == '\n' && h.state > 0:
			h.done = true
		case b == '\n':
			h.state = 1
		case b == '\r' && h.state == 1:
			h.state = 2
		default:
			h.state = 0
		}
	}
}

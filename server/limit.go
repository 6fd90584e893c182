package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// LimitListener lets at most n connections be open at once. A connection
// past the limit is answered "503 Service Unavailable" (with Retry-After)
// and closed at once, so a flood of connections degrades into quick refusals
// instead of exhausted file descriptors. refused is called for each.
func LimitListener(l net.Listener, n int, refused func()) net.Listener {
	return &limitListener{Listener: l, max: int64(n), refused: refused}
}

type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func()
}

const refusal = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: text/plain\r\n" +
	"Content-Length: 33\r\n\r\ntoo many connections; retry soon\n"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			if l.refused != nil {
				l.refused()
			}
			go func() {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write([]byte(refusal))
				c.Close()
			}()
			continue
		}
		return &limitConn{Conn: c, l: l}, nil
	}
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

//go:build linux

package test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// peerSocket is the descriptor of this process's own socket at local
// whose peer is remote (toolgate's connection to a test upstream, both in
// this process), or -1. A test upstream asks it how much of what it wrote
// toolgate has not read yet.
func peerSocket(local, remote string) int {
	lp, rp := addrPort(local), addrPort(remote)
	if lp < 0 || rp < 0 {
		return -1
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil || inetPort(sa) != lp {
			continue
		}
		if pa, err := syscall.Getpeername(fd); err == nil && inetPort(pa) == rp {
			return fd
		}
	}
	return -1
}

func addrPort(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

func inetPort(sa syscall.Sockaddr) int {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return a.Port
	case *syscall.SockaddrInet6:
		return a.Port
	}
	return -1
}

// unread is how many received bytes wait in socket fd for a read.
func unread(fd int) (int, error) {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

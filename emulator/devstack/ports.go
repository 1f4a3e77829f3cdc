package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/internal/topology"
)

// Fixed ports of the dev stack (before -port-offset). They are documented in README.md and printed at
// start; the Spanner and Cloud Tasks ones are the emulators' customary defaults, so tools configured
// for Google's Spanner emulator work unchanged.
const (
	spannerPort   = 9010
	tasksPort     = 8123
	tasksHTTPPort = 8124
	paysimPort    = 12111 // the payment sandbox (emulator/paysim): Stripe's and KOMOJU's APIs
	authPort      = 8125  // the customers' identity provider (emulator/authemu): Identity Platform's stand-in
	smtpPort      = 1025  // Mailpit's SMTP server (the notifications service sends to it)
	mailWebPort   = 8025  // Mailpit's web inbox and API
)

// mailpitPackage is the mail server the dev stack runs (a tool of the module, see go.mod).
const mailpitPackage = "github.com/axllent/mailpit"

// carrierAfter is when the dev stack's simulated carrier ships a confirmed order's shipment.
const carrierAfter = "5s"

// host is where everything listens and what the children are told to dial: the loopback address
// rather than "localhost", which may resolve to ::1 first while the emulators listen on IPv4 only.
const host = "127.0.0.1"

// A service is one of the Spanmart binaries the dev stack runs (internal/topology lists them).
type service struct {
	name string // also the binary's name (the last element of pkg)
	pkg  string // Go package, relative to the repository root
	port int    // before -port-offset
	// database is the service's own database (dbschema name); empty for the relay, which reads every
	// database's outbox.
	database string
}

// services in start order (the roster's): consumers first, the relay (which delivers to them)
// last. They stop in the reverse order.
var services = func() []service {
	var out []service
	for _, s := range topology.Services() {
		out = append(out, service{name: s.Name, pkg: s.Package, port: s.DevPort, database: s.Database})
	}
	return out
}()

// A listener is a port the stack will listen on, for the "port in use" check and the summary.
type listener struct {
	what string
	port int
}

// checkPortsFree fails, naming the port, its purpose and (on Linux, when it can tell) the process
// holding it, if any of the ports is already taken. Checking up front gives one clear message instead
// of an emulator failing deep in its start-up with "address already in use".
func checkPortsFree(ls []listener, offset int) error {
	var busy []string
	for _, l := range ls {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(l.port)))
		if err != nil {
			msg := fmt.Sprintf("port %d (%s) is already in use", l.port, l.what)
			if owner := portOwner(l.port); owner != "" {
				msg += " by " + owner
			}
			busy = append(busy, msg)
			continue
		}
		ln.Close()
	}
	if len(busy) > 0 {
		return fmt.Errorf("%s\n(is another dev stack running? stop it, or run this one beside it with -port-offset %d and another -state-dir)", strings.Join(busy, "\n"), offset+1000)
	}
	return nil
}

// portOwner names the process listening on TCP port, or "" when it cannot tell (not Linux, or the
// process belongs to another user). It reads /proc/net/tcp{,6} for the listening socket's inode and
// looks for a process with that socket among its file descriptors, as `ss -ltnp` does.
func portOwner(port int) string {
	inodes := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A = LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return ""
	}
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range pids {
		fds, _ := filepath.Glob(filepath.Join(dir, "fd", "*"))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && inodes[target] {
				pid := filepath.Base(dir)
				cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
				cmd := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
				if len(cmd) > 120 {
					cmd = cmd[:120] + "..."
				}
				return fmt.Sprintf("pid %s (%s)", pid, cmd)
			}
		}
	}
	return ""
}

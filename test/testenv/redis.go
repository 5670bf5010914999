package testenv

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startTimeout bounds how long a redis-server may take to accept connections.
const startTimeout = 15 * time.Second

// Redis is a redis-server process that a test started on a loopback port in a temp dir.
type Redis struct {
	Port int
	Dir  string
	// TLS is set when the server speaks TLS only; its CA signed the server certificate.
	TLS *TLSFiles

	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// TLSFiles are the PEM files of a test certificate authority and a server certificate it signed.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
	// RootCAs holds the CA, for clients.
	RootCAs *x509.CertPool
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// URL is the redis:// (or rediss://) URL of the server.
func (r *Redis) URL() string {
	if r.TLS != nil {
		return "rediss://" + r.Addr()
	}
	return "redis://" + r.Addr()
}

// RedisOption changes how StartRedis starts a server.
type RedisOption func(*redisConfig)

type redisConfig struct {
	tls   bool
	extra []string
}

// WithTLS makes the server accept TLS connections only, with a certificate from a fresh test CA.
func WithTLS() RedisOption { return func(c *redisConfig) { c.tls = true } }

// WithArgs passes extra configuration to redis-server, e.g. "--maxmemory", "10mb".
func WithArgs(args ...string) RedisOption {
	return func(c *redisConfig) { c.extra = append(c.extra, args...) }
}

// TB is what StartRedis needs of a test or benchmark; testing.TB is one. The package names it itself so
// that programs which start servers without being tests (the demo, the herd experiment) do not link
// Go's testing package.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// StartRedis starts a redis-server on a free loopback port in a temp dir and stops it when the test ends.
func StartRedis(tb TB, opts ...RedisOption) *Redis {
	tb.Helper()
	r, err := NewRedis(tb.TempDir(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Stop)
	return r
}

// NewRedis starts a redis-server on a free loopback port, with dir as its working directory. For
// suites that are not a single testing.T (Ginkgo, TestMain); the caller calls Stop.
func NewRedis(dir string, opts ...RedisOption) (*Redis, error) {
	cfg := redisConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found on PATH; run 'make toolchain' (Debian package redis-server)")
	}
	r := &Redis{Dir: dir}
	if cfg.tls {
		if r.TLS, err = WriteTestCertificates(dir); err != nil {
			return nil, err
		}
	}
	// A free port can be taken by another process between the probe and the start; try a few.
	var lastErr error
	for range 5 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		r.Port = port
		r.args = []string{
			"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--logfile", filepath.Join(dir, "redis.log"),
		}
		if r.TLS != nil {
			r.args = append(r.args, "--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cert-file", r.TLS.CertFile, "--tls-key-file", r.TLS.KeyFile,
				"--tls-ca-cert-file", r.TLS.CAFile, "--tls-auth-clients", "no")
		} else {
			r.args = append(r.args, "--port", strconv.Itoa(port))
		}
		r.args = append(r.args, cfg.extra...)
		if lastErr = r.start(bin); lastErr == nil {
			return r, nil
		}
	}
	return nil, lastErr
}

func (r *Redis) start(bin string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := exec.Command(bin, r.args...)
	cmd.Dir = r.Dir
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.cmd, r.done = cmd, done
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start:\n%s", r.Port, r.logTail())
		default:
		}
		if r.ping() == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server on port %d did not answer within %s:\n%s", r.Port, startTimeout, r.logTail())
}

// ping sends PING and expects PONG, over TLS when the server speaks it.
func (r *Redis) ping() error {
	conn, err := net.DialTimeout("tcp", r.Addr(), time.Second)
	if err != nil {
		return err
	}
	if r.TLS != nil {
		conn = tls.Client(conn, &tls.Config{RootCAs: r.TLS.RootCAs, ServerName: "127.0.0.1"})
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// PID is the server's process id, 0 while it is stopped.
func (r *Redis) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// CPU is the CPU time the server has used since it started; 0 while it is stopped.
func (r *Redis) CPU() time.Duration {
	stat, _ := ReadProcStat(r.PID())
	return stat.CPU
}

// Stop kills the server (as a crash would) and waits for it to exit. Stopping twice is fine.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// Pause stops the server without ending it (SIGSTOP), as a Redis stuck in a long command or behind a
// network that drops its packets looks to its clients: connections stay open, and nothing answers.
// resume lets it go on; resuming twice is fine, and the caller registers it to run at cleanup.
func (r *Redis) Pause() (resume func(), err error) {
	pid := r.PID()
	if pid == 0 {
		return nil, errors.New("redis-server is not running")
	}
	return PauseProcess(pid)
}

// PauseProcess stops process pid without ending it (SIGSTOP); resume (SIGCONT) lets it go on, and
// may be called more than once.
func PauseProcess(pid int) (resume func(), err error) {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pausing process %d: %w", pid, err)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }, nil
}

// Restart starts a stopped server again on the same port, with an empty data set.
func (r *Redis) Restart() error {
	r.Stop()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return err
	}
	return r.start(bin)
}

func (r *Redis) logTail() string {
	raw, err := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WriteTestCertificates creates a CA and a server certificate for 127.0.0.1 and localhost in dir.
func WriteTestCertificates(dir string) (*TLSFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "herdgate test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	files := &TLSFiles{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
		RootCAs:  x509.NewCertPool(),
	}
	files.RootCAs.AddCert(caCert)
	for path, block := range map[string]*pem.Block{
		files.CAFile:   {Type: "CERTIFICATE", Bytes: caDER},
		files.CertFile: {Type: "CERTIFICATE", Bytes: der},
		files.KeyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}
	return files, nil
}

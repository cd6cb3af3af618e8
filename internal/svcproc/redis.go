package svcproc

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
)

// FindRedis returns the redis-server to run: bin if it names a file or a
// command on PATH, else Debian's.
func FindRedis(bin string) (string, error) {
	return Find(bin, "redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server")
}

// StartRedis starts redis-server bin on a free port with its data in dir;
// with persist, an append-only file fsynced at every write keeps the data
// across restarts. prepare, if not nil, sets up each process before it
// starts.
func StartRedis(ctx context.Context, bin, dir string, persist bool, prepare func(*exec.Cmd)) (*Server, error) {
	s, err := Redis(bin, dir, persist, prepare)
	if err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// Redis is StartRedis without starting: set Conf or Args first.
func Redis(bin, dir string, persist bool, prepare func(*exec.Cmd)) (*Server, error) {
	appendonly := "no"
	if persist {
		appendonly = "yes"
	}
	return newServer(bin, dir, prepare, func(s *Server) []string {
		var args []string
		if s.Conf != "" {
			args = append(args, s.Conf)
		}
		return append(args, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--dir", s.dir,
			"--logfile", filepath.Join(s.dir, "redis.log"), "--save", "", "--appendonly", appendonly, "--appendfsync", "always")
	}, "appendonlydir", "appendonly.aof", "dump.rdb")
}

// RedisURL is the redis:// URL of a Redis server.
func RedisURL(s *Server) string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

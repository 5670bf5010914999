package testenv

import "fmt"

// KnownPassword is the password the secret sweeps put into every Redis URL they hand herdgate; no
// output of herdgate's (an error, a log line, a condition, an Event) may contain it.
const KnownPassword = "s3cret-pw-4hg7"

// MalformedRedisURLs are Redis URLs that carry KnownPassword and that herdgate must refuse, one of
// each way a URL can be wrong: scheme, port, host, path, option, escape, a Sentinel list.
func MalformedRedisURLs() []string {
	pw := KnownPassword
	return []string{
		"ftp://user:" + pw + "@localhost:6379",
		"redis://user:" + pw + "@localhost:99999",
		"redis://user:" + pw + "@local host:6379",
		"redis://user:" + pw + "@localhost:6379/x",
		"redis://user:" + pw + "@localhost:6379?bogus=1",
		"redis://:" + pw + "@[::1",
		"redis://localhost:6379?password=" + pw,
		"redis+sentinel://user:" + pw + "@s1:26379",
		"redis+sentinel://user:" + pw + "@s1:26379,s2/mymaster",
		"redis+sentinel://s1:26379/m?sentinel_password=" + pw + "&bogus=1",
		"redis+sentinel://s1:26379/m?sentinel_password=" + pw + "%zz",
		"redis+cluster://user:" + pw + "@localhost:7000/3",
	}
}

// UnusableRedisURLs are well-formed Redis URLs that carry KnownPassword and that herdgate cannot
// use: nothing listens at closedPort on loopback, and the Redis at redisAddr (host:port) has no user
// of that name (its default user takes any password).
func UnusableRedisURLs(closedPort int, redisAddr string) []string {
	pw := KnownPassword
	return []string{
		fmt.Sprintf("redis://user:%s@127.0.0.1:%d/0", pw, closedPort),
		fmt.Sprintf("redis+sentinel://:%s@127.0.0.1:%d/mymaster?sentinel_password=%s", pw, closedPort, pw),
		fmt.Sprintf("redis://nobody:%s@%s/0", pw, redisAddr),
	}
}

-- Built into every script with the keycheck tag (keycheck.go): a local redis that refuses, before
-- running it, a command on a key the caller did not declare in KEYS. Commands are listed by where
-- their keys are; a command the list does not know is refused, so that a new one is looked at.
local redis = (function(server)
  local declared = {}
  for _, k in ipairs(KEYS) do
    declared[k] = true
  end
  local FIRST, ALL, NONE = 1, 2, 3
  local keys_of = {
    GET = FIRST, SET = FIRST, INCR = FIRST, INCRBY = FIRST, EXPIRE = FIRST,
    HGET = FIRST, HSET = FIRST, HSETNX = FIRST, HMGET = FIRST, HDEL = FIRST, HINCRBY = FIRST, HVALS = FIRST, HKEYS = FIRST,
    HGETALL = FIRST, HSCAN = FIRST, HLEN = FIRST,
    ZADD = FIRST, ZREM = FIRST, ZRANGE = FIRST, ZSCORE = FIRST, ZMSCORE = FIRST, ZCOUNT = FIRST, ZRANK = FIRST,
    ZCARD = FIRST, ZSCAN = FIRST, ZPOPMIN = FIRST, ZREMRANGEBYSCORE = FIRST, ZRANGEBYSCORE = FIRST,
    RPUSH = FIRST, LRANGE = FIRST, LTRIM = FIRST, LLEN = FIRST, PFADD = FIRST,
    SADD = FIRST, SCARD = FIRST, SISMEMBER = FIRST, PEXPIREAT = FIRST,
    DEL = ALL, UNLINK = ALL, EXISTS = ALL, PFCOUNT = ALL,
    TIME = NONE, INFO = NONE, PUBLISH = NONE,
  }
  local function check(cmd, ...)
    local name = string.upper(cmd)
    local where = keys_of[name]
    if where == NONE then
      return
    end
    if not where then
      error('keycheck: ' .. name .. ' is not a command the key check knows')
    end
    local args = {...}
    local last = where == ALL and #args or 1
    for i = 1, last do
      if not declared[args[i]] then
        error('keycheck: ' .. name .. ' on undeclared key ' .. tostring(args[i]))
      end
    end
  end
  return setmetatable({
    call = function(cmd, ...)
      check(cmd, ...)
      return server.call(cmd, ...)
    end,
    pcall = function(cmd, ...)
      check(cmd, ...)
      return server.pcall(cmd, ...)
    end,
  }, {__index = server})
end)(redis)

-- Sandbox and the pure-Lua half of the `redis` API, run once per
-- interpreter. Frames of this chunk (named "=redis") are skipped when an
-- error is located, so errors point at the user's script as in Redis.
--
-- Redis patches Lua with read-only tables; stock Lua 5.1 has none, so the
-- globals and library tables scripts see are empty proxies whose
-- metatables forward reads and refuse writes. Every builtin that could
-- write through a proxy (setmetatable, rawset) is wrapped, and the
-- iteration builtins see through proxies to the real table.
local G, native = ...
local error, type, select, tostring, tonumber = error, type, select, tostring, tonumber
local rawget, rawset, next, setmetatable, setfenv = rawget, rawset, next, setmetatable, setfenv
local loadstring, load, xpcall, pcall = loadstring, load, xpcall, pcall
local sub, find, floor, ceil = string.sub, string.find, math.floor, math.ceil
local concat = table.concat

local RO = 'Attempt to modify a readonly table'
local backing = setmetatable({}, { __mode = 'k' })
local function refuse() error(RO, 2) end

local function protect(t, index)
  local mp = setmetatable({}, { __newindex = refuse, __metatable = false })
  backing[mp] = {}
  local p = setmetatable({}, { __index = index or t, __newindex = refuse, __metatable = mp })
  backing[p] = t
  return p
end

local function trunc(n)
  if n >= 0 then return floor(n) end
  return ceil(n)
end

-- An error table as Redis builds one from a message: "-CODE msg" keeps its
-- code, a bare message gets ERR.
local function errt(msg)
  if sub(msg, 1, 1) == '-' then
    local sp = find(msg, ' ', 1, true)
    if sp then
      msg = sub(msg, 2, sp - 1) .. ' ' .. sub(msg, sp + 1)
    else
      msg = 'ERR ' .. sub(msg, 2)
    end
  else
    msg = 'ERR ' .. msg
  end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return { err = msg }
end

-- Run-scoped native functions (RESP version), set from Rust before each
-- script runs; so are redis.call and redis.pcall, which must be native so
-- that `return redis.call(...)` keeps the caller's frame for error lines.
local state = {}

-- A prelude function made a C function (`cfunction` in lua.rs), so that an
-- error in `return f(...)` names the script's line, as Redis's C API does.
local cfunction = native.cfunction
local function asc(impl)
  return cfunction(function(...) return pcall(impl, ...) end)
end

local redis = {}
redis.sha1hex = asc(function(...)
  if select('#', ...) ~= 1 then error(errt('wrong number of arguments')) end
  return native.sha1hex((...))
end)
function redis.error_reply(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return errt('wrong number or type of arguments')
  end
  if sub(e, 1, 1) ~= '-' then e = '-' .. e end
  return errt(e)
end
function redis.status_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return errt('wrong number or type of arguments')
  end
  return { ok = s }
end
redis.log = asc(function(...)
  local n, level = select('#', ...), ...
  if n < 2 then error(errt('redis.log() requires two arguments or more.')) end
  if tonumber(level) == nil then error(errt('First argument must be a number (log level).')) end
  level = trunc(tonumber(level))
  if level < 0 or level > 3 then error(errt('Invalid log level.')) end
  -- The server's log, where one is lent (a run, a library load). As in
  -- Redis, strings and numbers are joined by spaces; other values leave
  -- their place empty.
  local log = state.log
  if not log then return end
  local parts = {}
  for i = 2, n do
    local v = select(i, ...)
    local t = type(v)
    parts[i - 1] = (t == 'string' or t == 'number') and tostring(v) or ''
  end
  log(level, concat(parts, ' '))
end)
redis.setresp = asc(function(...)
  if select('#', ...) ~= 1 then error(errt('redis.setresp() requires one argument.')) end
  local v = trunc(tonumber((...)) or 0)
  if v ~= 2 and v ~= 3 then error(errt('RESP version must be 2 or 3.')) end
  state.setresp(v)
end)
redis.set_repl = asc(function(...)
  if select('#', ...) ~= 1 then error(errt('redis.set_repl() requires one argument.')) end
  local v = trunc(tonumber((...)) or 0)
  if v < 0 or v > 3 then
    error(errt('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.'))
  end
  state.set_repl(v)
end)
function redis.replicate_commands() return true end
function redis.breakpoint() return false end
function redis.debug() end
redis.acl_check_cmd = asc(function(...)
  local r, e = (state.acl_check or native.acl_check_cmd)(...)
  if e then error(r) end
  return r
end)
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = native.version, native.version_num
-- Valkey's names for the same: densekv answers as Redis, so SERVER_NAME is
-- 'redis' and the VALKEY_VERSION fields stay absent (nil), as on Redis.
redis.SERVER_NAME, redis.SERVER_VERSION, redis.SERVER_VERSION_NUM = 'redis', native.version, native.version_num

-- A read-only view of what `source()` returns whose missing fields raise
-- Redis's error.
local function strict(t, source)
  return protect(t, function(_, k)
    local v = rawget(source(), k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end)
end

-- The environment scripts run in. While a function library loads,
-- `state.library` holds the load-time globals, so the library's code (and
-- the callbacks it defines, which share this environment) see only those
-- then, and the full globals when they run later. The bundled libraries
-- (cjson, cmsgpack, struct) are built and made read-only on first use.
local lazy = { cjson = native.cjson, cmsgpack = native.cmsgpack, struct = native.struct }
local function lazylib(k)
  local make = lazy[k]
  if not make then return nil end
  lazy[k] = nil
  local t = protect(make())
  G[k] = t
  return t
end
local env = protect(G, function(_, k)
  local source = state.library or G
  local v = rawget(source, k)
  if v == nil and source == G then v = lazylib(k) end
  if v == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  return v
end)

local function pnext(t, k) return next(backing[t] or t, k) end
G.next = pnext
G.pairs = function(t) return pnext, t, nil end
G.rawget = function(t, k) return rawget(backing[t] or t, k) end
G.rawset = asc(function(t, k, v)
  if backing[t] then error(RO, 2) end
  return rawset(t, k, v)
end)
G.setmetatable = asc(function(t, m)
  if backing[t] then error(RO, 2) end
  return setmetatable(t, m)
end)
G.loadstring = function(s, name)
  if type(s) == 'string' and sub(s, 1, 1) == '\27' then
    return nil, 'binary chunks are not allowed'
  end
  local f, e = loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
G.load = function(fn, name)
  local f, e = load(fn, name)
  if f then setfenv(f, env) end
  return f, e
end
-- Errors raised by redis.call reach Lua as native error objects; as in
-- Redis, pcall hands back the message of an error table.
local unwrap = native.unwrap
local function fixerr(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'userdata' then e = unwrap(e) end
  if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then e = rawget(e, 'err') end
  return false, e
end
G.pcall = function(...) return fixerr(pcall(...)) end
G.dofile, G.loadfile, G.print = nil, nil, nil
G.os = { clock = os.clock }
G.redis = redis
for _, lib in ipairs({ 'os', 'redis', 'string', 'math', 'table', 'coroutine', 'bit' }) do
  G[lib] = protect(G[lib])
end
-- Valkey's name for the API: the same (read-only) table, so `server == redis`.
G.server = G.redis
G._G = env

-- Runs a compiled script under Redis's error handler: errors become tables
-- {err=..., source=..., line=...} locating the user's frame.
local where = native.where
local function handler(err)
  if type(err) == 'userdata' then err = unwrap(err) end
  if type(err) ~= 'table' then err = { err = 'ERR ' .. tostring(err) } end
  local source, line = where()
  if source then
    err.source = source
    err.line = line
  end
  return err
end
-- Functions get their keys and arguments as parameters.
local function run(f, ...)
  if select('#', ...) == 0 then return xpcall(f, handler) end
  local keys, args = ...
  return xpcall(function() return (f(keys, args)) end, handler)
end

-- The globals of a library's load run: a `redis` with only
-- register_function, log and the version, all else an error.
local register = asc(function(...)
  local r = state.register
  if not r then error(errt('redis.register_function can only be called on FUNCTION LOAD command')) end
  return r(...)
end)
local lib_redis = { register_function = register, log = redis.log }
for _, k in ipairs({ 'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM',
                     'SERVER_NAME', 'SERVER_VERSION', 'SERVER_VERSION_NUM' }) do
  lib_redis[k] = redis[k]
end
local lib_redis_view = strict(lib_redis, function() return lib_redis end)
local library = { redis = lib_redis_view, server = lib_redis_view }

return env, state, run, redis, library

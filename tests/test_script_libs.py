"""The Lua libraries Redis bundles into its scripting engine (cjson,
cmsgpack, struct), byte for byte as Redis 7 gives them: cjson's number
format (%.14g), escapes, array detection, nesting limits, settings and error
texts; cmsgpack's choice of forms for every type and its unpacking API;
struct's formats, alignment and errors; and the libraries' tables read-only.
Expected values were taken from a real Redis server running the same
scripts."""

import pytest
import redis

HEX = "local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end\n"


def conv(v):
    if isinstance(v, bytes):
        return v.decode("latin1")
    if isinstance(v, list):
        return [conv(x) for x in v]
    return v


CASES = [
    ('json_num', False, 'return cjson.encode({1, 0.1, -5000, 1e14, 123456789012345, 0.00001, 1/3, 2^53, -0.5})', '[1,0.1,-5000,1e+14,1.2345678901234e+14,1e-05,0.33333333333333,9.007199254741e+15,-0.5]'),
    ('json_num_precision', False, 'local v = cjson.encode_number_precision(4); local s = cjson.encode(math.pi); local w = cjson.encode_number_precision(14); return {v, s, w, cjson.encode(math.pi)}', [4, '3.142', 14, '3.1415926535898']),
    ('json_str_escapes', False, 'return cjson.encode(\'a"b\\\\c/d\\n\\r\\t\\b\\f\\1\\31\\127é\')', '"a\\"b\\\\c\\/d\\n\\r\\t\\b\\f\\u0001\\u001f\\u007fÃ©"'),
    ('json_empty', False, 'return {cjson.encode({}), cjson.encode({{}}), cjson.encode({a={}})}', ['{}', '[{}]', '{"a":{}}']),
    ('json_array', False, "return cjson.encode({1, 'two', true, false, cjson.null})", '[1,"two",true,false,null]'),
    ('json_holes', False, 'return cjson.encode({[1]=1, [3]=3})', '[1,null,3]'),
    ('json_sparse_err', False, 'local ok, e = pcall(cjson.encode, {[1]=1, [20]=2}); return {tostring(ok), e}', ['false', 'Cannot serialise table: excessively sparse array']),
    ('json_sparse_convert', False, 'cjson.encode_sparse_array(true); local s = cjson.encode({[1]=1, [20]=2}); cjson.encode_sparse_array(false); return s', '{"1":1,"20":2}'),
    ('json_mixed_keys', False, "return cjson.encode({[1]='x', [1.5]='y'})", '{"1":"x","1.5":"y"}'),
    ('json_bad_key', False, 'local ok, e = pcall(cjson.encode, {[true]=1}); return {tostring(ok), e}', ['false', 'Cannot serialise boolean: table key must be a number or string']),
    ('json_nan', False, 'local ok, e = pcall(cjson.encode, 0/0); return {tostring(ok), e}', ['false', 'Cannot serialise number: must not be NaN or Inf']),
    ('json_inf_on', False, 'cjson.encode_invalid_numbers(true); local s = cjson.encode({1/0, -1/0}); cjson.encode_invalid_numbers(false); return s', '[inf,-inf]'),
    ('json_inf_null', False, "cjson.encode_invalid_numbers('null'); local s = cjson.encode({1/0}); local v = cjson.encode_invalid_numbers(); cjson.encode_invalid_numbers(false); return {s, v}", ['[null]', 'null']),
    ('json_depth', False, 'local t = {} local c = t for i=1,1001 do c[1] = {} c = c[1] end local ok, e = pcall(cjson.encode, t); return {tostring(ok), e}', ['false', 'Cannot serialise, excessive nesting (1001)']),
    ('json_depth_set', False, 'local v = cjson.encode_max_depth(2); local ok, e = pcall(cjson.encode, {{{1}}}); cjson.encode_max_depth(1000); return {v, tostring(ok), e}', [2, 'false', 'Cannot serialise, excessive nesting (3)']),
    ('json_func', False, 'local ok, e = pcall(cjson.encode, function() end); return {tostring(ok), e}', ['false', 'Cannot serialise function: type not supported']),
    ('json_cfg_bad', False, 'local ok, e = pcall(cjson.encode_max_depth, 0); return {tostring(ok), e, cjson.encode_max_depth()}', ['false', "bad argument #1 to '?' (expected integer between 1 and 2147483647)", 1000]),
    ('json_cfg_bool', False, "return {tostring(cjson.encode_keep_buffer()), tostring(cjson.encode_keep_buffer('off')), tostring(cjson.encode_keep_buffer(true)), tostring(cjson.decode_invalid_numbers()), tostring(cjson.encode_invalid_numbers())}", ['true', 'false', 'true', 'true', 'false']),
    ('json_sparse_cfg', False, 'return {cjson.encode_sparse_array()}', [None, 2, 10]),
    ('json_cfg_args', False, 'local ok, e = pcall(cjson.encode_max_depth, 1, 2); return {tostring(ok), e}', ['false', "bad argument #2 to '?' (found too many arguments)"]),
    ('json_encode_args', False, 'local ok, e = pcall(cjson.encode); return {tostring(ok), e}', ['false', "bad argument #1 to '?' (expected 1 argument)"]),
    ('jd_numbers', False, "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10, 1E2, 12345678901234567890]'), ' ')", '0 -5000 -1 0.0003 1023.2 0 100 1.2345678901235e+19'),
    ('jd_invalid_numbers', False, "local t = cjson.decode('[0x10, 010, +5, Infinity, -inf]'); return {tostring(t[1]), tostring(t[2]), tostring(t[3]), tostring(t[4]), tostring(t[5])}", ['16', '10', '5', 'inf', '-inf']),
    ('jd_nan', False, "local t = cjson.decode('[NaN]'); return tostring(t[1] ~= t[1])", 'true'),
    ('jd_strict', False, "cjson.decode_invalid_numbers(false); local ok, e = pcall(cjson.decode, '[0x10]'); cjson.decode_invalid_numbers(true); return {tostring(ok), e}", ['false', 'Expected value but found invalid number at character 2']),
    ('jd_strings', False, 'local t = cjson.decode(\'["a\\\\u00e9\\\\ud83d\\\\ude00\\\\/\\\\n\\\\\\\\"]\'); return t[1]', 'aÃ©ð\x9f\x98\x80/\n\\'),
    ('jd_object', False, 'local t = cjson.decode(\'{"a": [1, {"b": null}], "c": true}\'); return {#t.a, type(t.a[2].b), tostring(t.a[2].b == cjson.null), tostring(t.c)}', [2, 'userdata', 'true', 'true']),
    ('jd_empty', False, "local a, o = cjson.decode('[]'), cjson.decode('{}'); return {type(a), type(o), cjson.encode(a), cjson.encode(o)}", ['table', 'table', '{}', '{}']),
    ('jd_err_end', False, "local ok, e = pcall(cjson.decode, '[1, 2'); return {tostring(ok), e}", ['false', 'Expected comma or array end but found T_END at character 6']),
    ('jd_err_trailing', False, "local ok, e = pcall(cjson.decode, '[1] x'); return {tostring(ok), e}", ['false', 'Expected the end but found invalid token at character 5']),
    ('jd_err_key', False, "local ok, e = pcall(cjson.decode, '{1: 2}'); return {tostring(ok), e}", ['false', 'Expected object key string but found T_NUMBER at character 2']),
    ('jd_err_colon', False, 'local ok, e = pcall(cjson.decode, \'{"a" 2}\'); return {tostring(ok), e}', ['false', 'Expected colon but found T_NUMBER at character 6']),
    ('jd_err_comma', False, 'local ok, e = pcall(cjson.decode, \'{"a": 2 "b"}\'); return {tostring(ok), e}', ['false', 'Expected comma or object end but found T_STRING at character 9']),
    ('jd_err_token', False, "local ok, e = pcall(cjson.decode, 'nul'); return {tostring(ok), e}", ['false', 'Expected value but found invalid token at character 1']),
    ('jd_err_escape', False, 'local ok, e = pcall(cjson.decode, \'"\\\\q"\'); return {tostring(ok), e}', ['false', 'Expected value but found invalid escape code at character 2']),
    ('jd_err_unicode', False, 'local ok, e = pcall(cjson.decode, \'"\\\\ud800"\'); return {tostring(ok), e}', ['false', 'Expected value but found invalid unicode escape code at character 2']),
    ('jd_err_unterminated', False, 'local ok, e = pcall(cjson.decode, \'"abc\'); return {tostring(ok), e}', ['false', 'Expected value but found unexpected end of string at character 5']),
    ('jd_err_depth', False, "local ok, e = pcall(cjson.decode, string.rep('[', 1001) .. string.rep(']', 1001)); return {tostring(ok), e}", ['false', 'Found too many nested data structures (1001) at character 1001']),
    ('jd_depth_set', False, 'cjson.decode_max_depth(1); local ok, e = pcall(cjson.decode, \'{"obj": {"array": [1,2,3,4]}}\'); cjson.decode_max_depth(1000); return {tostring(ok), e}', ['false', 'Found too many nested data structures (2) at character 9']),
    ('jd_utf16', False, "local ok, e = pcall(cjson.decode, '\\0[\\0]'); return {tostring(ok), e}", ['false', 'JSON parser does not support UTF-16 or UTF-32']),
    ('jd_empty_input', False, "local ok, e = pcall(cjson.decode, ''); return {tostring(ok), e}", ['false', 'Expected value but found T_END at character 1']),
    ('jd_scalar', False, 'return {cjson.decode(\'"x"\'), tostring(cjson.decode(\'12.5\')), tostring(cjson.decode(\'true\'))}', ['x', '12.5', 'true']),
    ('json_fields', False, 'return {cjson._NAME, cjson._VERSION, type(cjson.null), type(cjson.new)}', ['cjson', '2.1.0', 'userdata', 'function']),
    ('mp_ints', True, 'return {hex(cmsgpack.pack(0)), hex(cmsgpack.pack(127)), hex(cmsgpack.pack(128)), hex(cmsgpack.pack(255)), hex(cmsgpack.pack(256)), hex(cmsgpack.pack(65535)), hex(cmsgpack.pack(65536)), hex(cmsgpack.pack(4294967295)), hex(cmsgpack.pack(4294967296)), hex(cmsgpack.pack(-1)), hex(cmsgpack.pack(-32)), hex(cmsgpack.pack(-33)), hex(cmsgpack.pack(-128)), hex(cmsgpack.pack(-129)), hex(cmsgpack.pack(-32768)), hex(cmsgpack.pack(-32769)), hex(cmsgpack.pack(-2147483648)), hex(cmsgpack.pack(-2147483649)), hex(cmsgpack.pack(-1099511627776))}', ['00', '7f', 'cc80', 'ccff', 'cd0100', 'cdffff', 'ce00010000', 'ceffffffff', 'cf0000000100000000', 'ff', 'e0', 'd0df', 'd080', 'd1ff7f', 'd18000', 'd2ffff7fff', 'd280000000', 'd3ffffffff7fffffff', 'd3ffffff0000000000']),
    ('mp_floats', True, 'return {hex(cmsgpack.pack(0.5)), hex(cmsgpack.pack(0.1)), hex(cmsgpack.pack(-1.5)), hex(cmsgpack.pack(1/0)), hex(cmsgpack.pack(2^64))}', ['ca3f000000', 'cb3fb999999999999a', 'cabfc00000', 'ca7f800000', 'ca5f800000']),
    ('mp_misc', True, 'return {hex(cmsgpack.pack(true)), hex(cmsgpack.pack(false)), hex(cmsgpack.pack(nil)), hex(cmsgpack.pack(function() end))}', ['c3', 'c2', 'c0', 'c0']),
    ('mp_strings', True, "return {hex(cmsgpack.pack('')), hex(cmsgpack.pack('abc')), hex(cmsgpack.pack(string.rep('x', 31))):sub(1, 4), hex(cmsgpack.pack(string.rep('x', 32))):sub(1, 6), hex(cmsgpack.pack(string.rep('x', 256))):sub(1, 8), hex(cmsgpack.pack(string.rep('x', 65536))):sub(1, 12)}", ['a0', 'a3616263', 'bf78', 'd92078', 'da010078', 'db0001000078']),
    ('mp_tables', True, "return {hex(cmsgpack.pack({})), hex(cmsgpack.pack({1, 2, 3})), hex(cmsgpack.pack({a=1})), hex(cmsgpack.pack({[1]=1, [3]=3})), hex(cmsgpack.pack({1, 2, nil, 4})):sub(1,2), hex(cmsgpack.pack({'a', {'b', {'c'}}}))}", ['90', '93010203', '81a16101', '8201010303', '83', '92a16192a16291a163']),
    ('mp_big_array', True, 'local t = {} for i=1,16 do t[i]=i end local u = {} for i=1,65536 do u[i]=0 end return {hex(cmsgpack.pack(t)):sub(1,6), hex(cmsgpack.pack(u)):sub(1,10)}', ['dc0010', 'dd00010000']),
    ('mp_multi', True, "return hex(cmsgpack.pack(1, 'a', true))", '01a161c3'),
    ('mp_roundtrip', False, "local v = {1, -1, 2^40, -2^40, 0.5, 0.1, 'str', true, false, {x={y={z=1}}}} local d = cmsgpack.unpack(cmsgpack.pack(v)) return cjson.encode(d)", '[1,-1,1099511627776,-1099511627776,0.5,0.1,"str",true,false,{"x":{"y":{"z":1}}}]'),
    ('mp_unpack_types', False, "local a, b, c, d, e, f = cmsgpack.unpack(cmsgpack.pack(1, 'x', false, 0.25, {1,2}, 300)) return {a, b, tostring(c), tostring(d), #e, f}", [1, 'x', 'false', '0.25', 2, 300]),
    ('mp_unpack_one', False, 'local s = cmsgpack.pack(1, 2, 3) local o1, v1 = cmsgpack.unpack_one(s) local o2, v2 = cmsgpack.unpack_one(s, o1) local o3, v3 = cmsgpack.unpack_one(s, o2) return {o1, v1, o2, v2, o3, v3}', [1, 1, 2, 2, -1, 3]),
    ('mp_unpack_limit', False, 'local s = cmsgpack.pack(1, 2, 3) local o, a, b = cmsgpack.unpack_limit(s, 2) return {o, a, b}', [2, 1, 2]),
    ('mp_err_missing', False, "local ok, e = pcall(cmsgpack.unpack, '\\205\\1') return {tostring(ok), e}", ['false', 'Missing bytes in input.']),
    ('mp_err_format', False, "local ok, e = pcall(cmsgpack.unpack, '\\193') return {tostring(ok), e}", ['false', 'Bad data format in input.']),
    ('mp_err_offset', False, "local ok, e = pcall(cmsgpack.unpack_one, 'abc', 10) return {tostring(ok), e}", ['false', 'Start offset 10 greater than input length 3.']),
    ('mp_err_negative', False, "local ok, e = pcall(cmsgpack.unpack_limit, 'abc', -1) return {tostring(ok), e}", ['false', 'Invalid request to unpack with offset of 0 and limit of 3.']),
    ('mp_err_noarg', False, 'local ok, e = pcall(cmsgpack.pack) return {tostring(ok), e}', ['false', "bad argument #0 to '?' (MessagePack pack needs input.)"]),
    ('mp_uint64', False, "return tostring(cmsgpack.unpack('\\207\\0\\0\\1\\0\\0\\0\\0\\0'))", '1099511627776'),
    ('mp_fields', False, 'return {cmsgpack._NAME, cmsgpack._VERSION}', ['cmsgpack', 'lua-cmsgpack 0.4.0']),
    ('st_pack', True, "return {hex(struct.pack('>I2', 258)), hex(struct.pack('<i', -2)), hex(struct.pack('b', -1)), hex(struct.pack('B', 255)), hex(struct.pack('>h', -2)), hex(struct.pack('H', 513)), hex(struct.pack('>l', 1)), hex(struct.pack('L', 1)), hex(struct.pack('T', 7)), hex(struct.pack('>i3', 65536))}", ['0102', 'feffffff', 'ff', 'ff', 'fffe', '0102', '0000000000000001', '0100000000000000', '0700000000000000', '010000']),
    ('st_floats', True, "return {hex(struct.pack('>d', 1.5)), hex(struct.pack('<f', 0.5)), hex(struct.pack('>f', -2))}", ['3ff8000000000000', '0000003f', 'c0000000']),
    ('st_strings', True, "return {hex(struct.pack('c3', 'abcdef')), hex(struct.pack('s', 'hi')), hex(struct.pack('c0', 'xyz')), hex(struct.pack('xBx', 1))}", ['616263', '686900', '78797a', '000100']),
    ('st_align', True, "return {hex(struct.pack('!4 b i', 1, 2)), hex(struct.pack('!2 b d', 1, 0)), hex(struct.pack('! b d', 1, 0)), hex(struct.pack('!8 b h', 1, 2))}", ['0100000002000000', '01000000000000000000', '01000000000000000000000000000000', '01000200']),
    ('st_unpack', False, "return {struct.unpack('>I2', '\\1\\2')} ", [258, 3]),
    ('st_unpack_many', False, "local a, b, c, d, n = struct.unpack('<bhc2s', '\\255\\2\\1ab' .. 'str\\0') return {a, b, c, d, n}", [-1, 258, 'ab', 'str', 10]),
    ('st_unpack_float', False, "local a, b, n = struct.unpack('>dfx', struct.pack('>dfx', 1.25, 0.75)) return {tostring(a), tostring(b), n}", ['1.25', '0.75', 14]),
    ('st_unpack_c0', False, "local s, n = struct.unpack('bc0', '\\3abcd') return {s, n}", ['abc', 5]),
    ('st_unpack_pos', False, "local v, n = struct.unpack('b', 'xyz', 2) return {v, n}", [121, 3]),
    ('st_unpack_signed', False, "return {struct.unpack('>i3', '\\255\\255\\254')}", [-2, 4]),
    ('st_size', False, "return {struct.size('i'), struct.size('>bhl'), struct.size('!4 b i'), struct.size('d c5 x'), struct.size('i7')}", [4, 11, 8, 14, 7]),
    ('st_err_opt', False, "local ok, e = pcall(struct.pack, 'z', 1) return {tostring(ok), e}", ['false', "bad argument #1 to '?' (invalid format option 'z')"]),
    ('st_err_short', False, "local ok, e = pcall(struct.unpack, 'i', 'ab') return {tostring(ok), e}", ['false', "bad argument #2 to '?' (data string too short)"]),
    ('st_err_size', False, "local ok, e = pcall(struct.pack, 'i33', 1) return {tostring(ok), e}", ['false', 'integral size 33 is larger than limit of 32']),
    ('st_err_align', False, "local ok, e = pcall(struct.pack, '!3 i', 1) return {tostring(ok), e}", ['false', 'alignment 3 is not a power of 2']),
    ('st_err_s_size', False, "local ok, e = pcall(struct.size, 's') return {tostring(ok), e}", ['false', "bad argument #1 to '?' (option 's' has no fixed size)"]),
    ('st_err_strshort', False, "local ok, e = pcall(struct.pack, 'c5', 'ab') return {tostring(ok), e}", ['false', "bad argument #3 to '?' (string too short)"]),
    ('st_err_unfinished', False, "local ok, e = pcall(struct.unpack, 's', 'abc') return {tostring(ok), e}", ['false', 'unfinished string in data']),
    ('st_err_offset', False, "local ok, e = pcall(struct.unpack, 'b', 'abc', 0) return {tostring(ok), e}", ['false', "bad argument #3 to '?' (offset must be 1 or greater)"]),
    ('st_err_c0', False, "local ok, e = pcall(struct.unpack, 'c0', 'abc') return {tostring(ok), e}", ['false', "format 'c0' needs a previous size"]),
    ('ro_cjson', False, 'local ok, e = pcall(function() cjson.encode = 1 end) return e', 'user_script:1: Attempt to modify a readonly table'),
    ('ro_cmsgpack', False, 'local ok, e = pcall(function() cmsgpack.pack = 1 end) return e', 'user_script:1: Attempt to modify a readonly table'),
    ('ro_struct', False, 'local ok, e = pcall(function() struct.pack = 1 end) return e', 'user_script:1: Attempt to modify a readonly table'),
]


@pytest.mark.parametrize("name,hexed,body,expected", CASES, ids=[c[0] for c in CASES])
def test_library_output_matches_redis(r, name, hexed, body, expected):
    assert conv(r.eval((HEX if hexed else "") + body, 0)) == expected


def test_library_errors_are_placed_at_the_calling_line(r):
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return cjson.decode('[')", 0)
    # Placed at the calling line, like a C library's luaL_error.
    assert str(e.value).startswith("user_script:1: Expected value but found T_END at character 2 script:")
    assert str(e.value).endswith("on @user_script:1.")
    with pytest.raises(redis.ResponseError) as e:
        r.eval("cmsgpack.pack = 1", 0)
    assert "Attempt to modify a readonly table" in str(e.value)


def test_settings_persist_between_scripts(r):
    try:
        assert r.eval("return cjson.encode_number_precision(3)", 0) == 3
        assert r.eval("return cjson.encode(1/3)", 0) == b"0.333"
    finally:
        r.eval("cjson.encode_number_precision(14)", 0)
    assert r.eval("return cjson.encode(1/3)", 0) == b"0.33333333333333"


def test_circular_table_packs_sixteen_levels(r):
    # A table referring to itself is packed as deep copies down to 16
    # levels, the last one as nil.
    body = HEX + """local a = {x=nil,y=5}
        local b = {x=a}
        a['x'] = b
        local re = cmsgpack.unpack(cmsgpack.pack(a))
        return {hex(cmsgpack.pack(a)), re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y}"""
    h, y = r.eval(body, 0)
    assert h == b"82a17905a17881a17882a17905" + b"a17881a17882a17905" * 6 + b"a17881a178c0"
    assert y == 5


def test_functions_see_the_libraries(r):
    code = "#!lua name=libsjson\nredis.register_function('tojson', function(k, a) return cjson.encode({a[1]}) end)"
    r.function_load(code, replace=True)
    try:
        assert r.fcall("tojson", 0, "v") == b'["v"]'
    finally:
        r.function_delete("libsjson")

// The CommonJS build under Jest, against the binary (UNDERSTUDY_BIN).
const lib = require('../dist/cjs/index.js');
require('./suite.cjs')({ test, expect, afterAll }, lib, 'jest');

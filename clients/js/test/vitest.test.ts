// The ESM build (with its types) under vitest, against the binary (UNDERSTUDY_BIN).
import { afterAll, expect, test } from 'vitest';
import { createRequire } from 'node:module';
import * as lib from '../dist/esm/index.js';

const require = createRequire(import.meta.url);
require('./suite.cjs')({ test, expect, afterAll }, lib, 'vitest');

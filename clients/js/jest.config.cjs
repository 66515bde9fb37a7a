module.exports = { testMatch: ['**/test/jest.test.cjs'], testEnvironment: 'node', transform: {} };

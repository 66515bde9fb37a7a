// Preloaded with NODE_OPTIONS=--require by scripts/mcp-record-replay.sh: every server that
// listens on a port without naming a host listens on 127.0.0.1 only (the reference server
// calls app.listen(PORT), which would bind every interface).
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === 'number' || typeof args[0] === 'string') && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};

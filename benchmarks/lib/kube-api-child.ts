// The child side of kube-api-process.ts: starts the Kubernetes API double (test/helpers/kube-api) in
// this process, tells the parent where it is, and answers its requests for the request log.

import { startKubeApi } from '../../test/helpers/kube-api/index.js';

const api = await startKubeApi();
process.on('message', (m: unknown) => {
  if (m === 'requests') process.send!({ requests: api.requests });
  if (m === 'stop') void api.close().then(() => process.exit(0));
});
process.on('disconnect', () => void api.close().then(() => process.exit(0)));
process.send!({ kubeconfigPath: api.kubeconfigPath, url: api.url });

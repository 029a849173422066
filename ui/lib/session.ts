/** Composition: wires the API and the socket to the app's state, and signs in. */

import { ApiError, api, configureApi } from './api.js';
import { connectSocket, disconnectSocket, onLinkStatus, onServerEvent } from './socket.js';
import { auth } from './state/auth.svelte.js';
import { gearman } from './state/gearman.svelte.js';
import { server } from './state/server.svelte.js';

let started = false;

/** Loads the config, asks for a token when needed, then opens the live link. Call once. */
export async function startSession(): Promise<void> {
  if (started) return;
  started = true;
  configureApi({ getToken: () => auth.token, onUnauthorized: () => auth.require() });

  onLinkStatus((status, detail) => {
    server.setLink(status, detail);
    if (status === 'unauthorized') auth.require();
  });
  onServerEvent('snapshot', (snapshot) => {
    auth.accepted();
    server.applySnapshot(snapshot);
  });
  onServerEvent('stats:ticked', (tick) => server.applyTick(tick));
  onServerEvent('tubes:updated', (tubes) => server.applyTubes(tubes));
  onServerEvent('tubes:removed', (names) => server.removeTubes(names));
  onServerEvent('gearman:updated', (snapshot) => gearman.apply(snapshot));
  onServerEvent('server:draining', () => {
    server.drainingAnnounced = true;
  });

  try {
    server.applyConfig(await api.config());
  } catch (error) {
    // 401: the sign-in form is up already (onUnauthorized). Unreachable: the socket keeps trying.
    if (error instanceof ApiError && error.status === 401) return;
  }
  if (server.config?.tokenRequired === true && (auth.token === null || auth.token === '')) {
    server.setLink('unauthorized', 'the admin token is needed');
    auth.require();
    return;
  }
  connectSocket(auth.token);
  await loadSignedIn();
}

/** Who the token is, and so which controls the pages show. */
async function loadSignedIn(): Promise<void> {
  try {
    server.me = await api.me();
  } catch {
    server.me = null; // a 401 shows the sign-in form; the controls stay hidden meanwhile
  }
}

/** Tries a token: true when the server accepts it (the live link is then reopened with it). */
export async function signIn(token: string): Promise<boolean> {
  auth.setToken(token);
  try {
    await api.stats();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      auth.setToken(null); // keep only tokens the server accepted
      auth.rejected = true;
      return false;
    }
    throw error;
  }
  auth.accepted();
  try {
    server.applyConfig(await api.config());
  } catch {
    // the snapshot brings it too
  }
  connectSocket(token);
  await loadSignedIn();
  return true;
}

export function signOut(): void {
  server.me = null;
  disconnectSocket();
  server.setLink('unauthorized', 'signed out');
  auth.setToken(null);
  auth.rejected = false;
  auth.needed = true;
}

/** The admin token (when the server wants one), kept for the browser tab in sessionStorage. */

const STORAGE_KEY = 'beanpole.adminToken';

function readStored(): string | null {
  try {
    return window.sessionStorage.getItem(STORAGE_KEY);
  } catch {
    return null; // storage disabled: the token lives in memory only
  }
}

export class AuthState {
  token = $state<string | null>(readStored());
  /** True while the sign-in form should be shown (a 401, or a socket refusal). */
  needed = $state(false);
  /** The last token tried was refused. */
  rejected = $state(false);

  setToken(token: string | null): void {
    this.token = token;
    try {
      if (token === null) window.sessionStorage.removeItem(STORAGE_KEY);
      else window.sessionStorage.setItem(STORAGE_KEY, token);
    } catch {
      // storage disabled
    }
  }

  /** The server refused the current token (or its absence). */
  require(): void {
    if (this.token !== null) this.rejected = true;
    this.needed = true;
  }

  accepted(): void {
    this.needed = false;
    this.rejected = false;
  }
}

export const auth = new AuthState();

/** Short messages after an action ("Kicked 3 jobs", "Tube not found"), shown in a live region. */

import { describeError } from '../api.js';

export type NoticeKind = 'info' | 'error';

export interface Notice {
  id: number;
  kind: NoticeKind;
  text: string;
}

const SHOW_MS = 6000;
const MAX_SHOWN = 4;

export class Notices {
  list = $state.raw<Notice[]>([]);
  private nextId = 1;

  info(text: string): void {
    this.push('info', text);
  }

  error(text: string): void {
    this.push('error', text);
  }

  /** Runs `step`, then says `done` or why it failed (the server's explanation when there is one). */
  async after(step: () => Promise<unknown>, done: string): Promise<void> {
    try {
      await step();
      this.info(done);
    } catch (e) {
      this.error(describeError(e));
    }
  }

  dismiss(id: number): void {
    this.list = this.list.filter((notice) => notice.id !== id);
  }

  private push(kind: NoticeKind, text: string): void {
    const id = this.nextId++;
    this.list = [...this.list, { id, kind, text }].slice(-MAX_SHOWN);
    setTimeout(() => this.dismiss(id), kind === 'error' ? SHOW_MS * 2 : SHOW_MS);
  }
}

export const notices = new Notices();

/**
 * The code editor (CodeMirror) is most of the dashboard's script by size and only the put and
 * edit forms use it: it is loaded when one of them opens, in a chunk of its own.
 */
import type BodyEditor from '../components/job/BodyEditor.svelte';

let loading: Promise<typeof BodyEditor> | null = null;

export function loadBodyEditor(): Promise<typeof BodyEditor> {
  loading ??= import('../components/job/BodyEditor.svelte').then((m) => m.default);
  return loading;
}

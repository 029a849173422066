import { mount } from 'svelte';
import './app.css';
import App from './App.svelte';
import { startSession } from './lib/session.js';
import { clock } from './lib/state/clock.svelte.js';
import { router } from './lib/state/router.svelte.js';

const target = document.getElementById('app');
if (target === null) throw new Error('missing #app');

router.start();
clock.start();
void startSession();

export default mount(App, { target });
